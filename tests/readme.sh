#!/bin/sh
# The README and the pages under docs/ say what the tools print and how the project behaves;
# this runs what they show and compares. Prints "ok NAME" or "FAIL NAME: why" per check.
# Usage: sh tests/readme.sh [BINDIR] (default bin), from the top of the tree; MPIEXEC names the
# launcher (mpiexec.mpich).
BINDIR=${1:-bin}
: "${MPIEXEC:=mpiexec.mpich}"
nbcc=$BINDIR/nbcc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() { # NAME STATUS [WHY]
    if [ "$2" -eq 0 ]; then echo "ok $1"; else echo "FAIL $1${3:+: $3}"; fi
}
top=$(pwd)

# ---- every "$ command" in a fenced block of README.md and the pages that show one, with the
# lines under it as its output, exactly ----
for doc in README.md docs/language.md docs/selection.md docs/failures.md; do
    awk -v dir="$tmp" -v doc="$(basename "$doc" .md)" '
        /^```/ { fence = !fence; n = 0; next }
        fence && /^\$ / { k++; n = 1; file = dir "/" doc "." k; print substr($0, 3) > (file ".cmd"); printf "" > (file ".want"); next }
        fence && n { print > (file ".want") }' "$doc"
done
for cmd in "$tmp"/*.cmd; do
    [ -f "$cmd" ] || continue
    line=$(cat "$cmd")
    run=$(printf '%s\n' "$line" | sed "s|^\(\./\)\{0,1\}bin/|$BINDIR/|")
    sh -c "$run" > "$tmp/got" 2>&1
    diff -u "${cmd%.cmd}.want" "$tmp/got" > "$tmp/diff"
    check "$(basename "${cmd%.*}" | sed 's/\..*//') shows what \`$line\` prints" $? "$(head -n 12 "$tmp/diff")"
done

# ---- the tutorial's mistake (docs/language.md): the caret diagram, as printed there ----
awk '/^Make a mistake/ { on = 1 } on && /^```/ { if (f) exit; f = 1; next } f' docs/language.md > "$tmp/want"
printf 'schedule bad implements allreduce\n{\n    round { send recvbuf to rank + p; }\n}\n' > "$tmp/bad.nbs"
(cd "$tmp" && "$top/$nbcc" check bad.nbs > got 2>&1; echo $? > rc)
[ -s "$tmp/want" ] && diff -u "$tmp/want" "$tmp/got" > "$tmp/diff" && [ "$(cat "$tmp/rc")" = 1 ]
check "docs/language.md's mistake: nbcc check prints the diagnostic shown and exits 1" $? "$(head -n 12 "$tmp/diff")"

# ---- the README's front door: its first block is the two set-up commands; its examples are
# the files they name ----
[ "$(awk '/^```/ { if (f) exit; f = 1; next } f { print $1, $2 }' README.md | tr '\n' ' ')" = "make demo make test " ]
check "the README starts with make demo and make test" $? "$(awk '/^```/ { if (f) exit; f = 1; next } f' README.md)"
awk '/^schedule allreduce_star/, /^}/' README.md > "$tmp/want"
awk '/^schedule allreduce_star/, /^}/' examples/allreduce_star.nbs | diff -u "$tmp/want" - > "$tmp/diff" && [ -s "$tmp/want" ]
check "the README's star schedule is examples/allreduce_star.nbs" $? "$(head -n 12 "$tmp/diff")"
awk '/^```c/ { f = 1; next } f && /^```/ { exit } f && NF' README.md > "$tmp/want"
missing=$(while IFS= read -r l; do l=$(printf '%s' "$l" | sed 's/^ *//'); grep -qF -- "$l" examples/overlap.c || printf '%s\n' "$l"; done < "$tmp/want")
[ -s "$tmp/want" ] && [ -z "$missing" ]
check "the README's C example is lines of examples/overlap.c" $? "not there: $missing"

# ---- the documentation maps: every page under docs/ is listed, every link leads to a file ----
missing=""
for page in docs/*.md; do
    case $page in docs/README.md | docs/performance-p2.md | docs/performance-collectives-p2.md) continue ;; esac # (tables a page shows)
    grep -q "](${page#docs/})" docs/README.md || missing="$missing $page"
    grep -q "](${page})" README.md || missing="$missing README:$page"
done
check "docs/README.md and the README list every page under docs/" $((${#missing} != 0)) "missing:$missing"
dead=$( { grep -o '][(]docs/[^)]*)' README.md | sed 's/^](//; s/)$//'
         grep -o '][(][^)/]*)' docs/README.md | sed 's/^](/docs\//; s/)$//'; } |
       while read -r f; do [ -e "$f" ] || printf ' %s' "$f"; done)
check "the documentation maps link to files that exist" $((${#dead} != 0)) "dead:$dead"

# ---- nbcc check of a directory checks every file in it ----
mkdir "$tmp/dir"
cp examples/allreduce_star.nbs "$tmp/bad.nbs" "$tmp/dir/"
"$nbcc" check "$tmp/dir" > "$tmp/out" 2>&1
rc=$?
grep -q "allreduce_star.nbs: ok (1 schedule)" "$tmp/out" && grep -q "dir/bad.nbs:3:34: error: peer" "$tmp/out"
check "nbcc check DIR checks each .nbs in it and fails on a broken one" $((rc != 1 || $? != 0)) "exit $rc: $(cat "$tmp/out")"

# ---- names: the short names NBC_ALLREDUCE takes; a sorted list ----
"$nbcc" dump allreduce_ring --p 4 > "$tmp/full" 2>&1
"$nbcc" dump ring --p 4 > "$tmp/short" 2>&1
cmp -s "$tmp/full" "$tmp/short" && grep -q "^schedule allreduce_ring" "$tmp/short"
check "nbcc dump ring --p 4 is nbcc dump allreduce_ring --p 4" $? "$(head -n 3 "$tmp/short")"
"$nbcc" verify dissemination --p 1..4 > "$tmp/out" 2>&1 && grep -q "^barrier_dissemination" "$tmp/out"
check "nbcc verify takes the short name of another collective's schedule" $? "$(cat "$tmp/out")"
"$nbcc" list > "$tmp/list" 2>&1
awk 'NR > 1 { c = $2; if (c == "(block)") blocks = 1; else if (blocks) bad = 1
              if (c == prev && $1 < name) bad = 1; prev = c; name = $1 }
     END { exit bad || !blocks }' "$tmp/list"
check "nbcc list is sorted by collective and name, building blocks last" $? "$(cat "$tmp/list")"
[ "$(awk 'NR > 1 { print $2 }' "$tmp/list" | uniq | tr '\n' ' ')" = \
    "allreduce reduce bcast barrier reduce_scatter allgather allreduce_multi alltoall gather scatter scan exscan alltoallv gatherv scatterv allgatherv reduce_scatterv (block) " ]
check "nbcc list groups the collectives in the README's order" $? "$(awk 'NR > 1 { print $2 }' "$tmp/list" | uniq | tr '\n' ' ')"

# ---- versions: one source of truth ----
version=$(sed -n 's/^#define NBC_VERSION "\(.*\)"/\1/p' runtime/nbc.h)
major=$(sed -n 's/^#define NBC_VERSION_MAJOR //p' runtime/nbc.h)
minor=$(sed -n 's/^#define NBC_VERSION_MINOR //p' runtime/nbc.h)
patch=$(sed -n 's/^#define NBC_VERSION_PATCH //p' runtime/nbc.h)
[ -n "$version" ] && [ "$version" = "$major.$minor.$patch" ]
check "NBC_VERSION is NBC_VERSION_MAJOR.MINOR.PATCH ($version)" $?
[ "$("$nbcc" --version)" = "nbcc $version" ]
check "nbcc --version prints $version" $? "$("$nbcc" --version 2>&1)"
[ "$(make -s --no-print-directory -f Makefile -f - print-version NO_DEPS=1 <<'EOF'
print-version: ; @echo $(VERSION)
EOF
)" = "$version" ]
check "the Makefile's VERSION is read from nbc.h" $?
"$nbcc" help dump > "$tmp/a" 2>&1 && "$nbcc" dump --help > "$tmp/b" 2>&1 && cmp -s "$tmp/a" "$tmp/b"
check "nbcc help dump prints dump's help" $? "$(head -n 2 "$tmp/a")"

# ---- messages: one line each, "nbcc COMMAND: ...", naming the bad value and the good ones ----
mistake() { # NAME WANT COMMAND...: one line on stderr, exit 2, matching WANT
    name=$1 want=$2
    shift 2
    "$@" > "$tmp/out" 2> "$tmp/err"
    rc=$?
    [ "$rc" -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && [ ! -s "$tmp/out" ] && grep -q -- "$want" "$tmp/err"
    check "$name" $? "exit $rc: $(cat "$tmp/err" "$tmp/out" | head -n 4)"
}
mistake "--collective alreduce names it and the collectives, on one line" \
    "^nbcc explain: unknown collective 'alreduce' (known: allreduce, reduce, .*allgather, allreduce_multi, alltoall, .*reduce_scatterv) (see 'nbcc explain --help')$" \
    "$nbcc" explain --collective alreduce --p 4 --count 8
mistake "--type long_dubble names it and the types, on one line" \
    "^nbcc dump: unknown type 'long_dubble' (known: int8, .*, long_double) (see 'nbcc dump --help')$" \
    "$nbcc" dump ring --p 4 --type long_dubble
mistake "explain takes the types dump takes (long_double)" "^nbcc explain: --p P is required" \
    "$nbcc" explain --collective allreduce --type long_double --count 8
mistake "simulate --bytes 1q: one clear error" "^nbcc simulate: --bytes wants .* not '1q'" \
    "$nbcc" simulate ring --p 4 --bytes 1q
mistake "a missing --p: one line, not the usage" "^nbcc dump: --p P (P >= 1) is required (see 'nbcc dump --help')$" \
    "$nbcc" dump ring
mistake "an unknown option: one line" "^nbcc verify: unknown option '--frob'" "$nbcc" verify ring --frob
mistake "an option without its value: one line" "^nbcc draw: --p wants a value" "$nbcc" draw ring --p
mistake "a bad number: one line" "^nbcc dump: --p wants a number, not 'four'" "$nbcc" dump ring --p four
mistake "an unknown command: one line" "^nbcc: unknown command 'frob' (see 'nbcc --help')$" "$nbcc" frob
"$nbcc" dump linear --p 2 > "$tmp/out" 2>&1
grep -q "^schedule allreduce_linear" "$tmp/out"
check "a short name is an allreduce's first, as NBC_ALLREDUCE takes it" $? "$(head -n 2 "$tmp/out")"
grep -h 'fprintf(stderr, "nbcc[ :]\|fputs("nbcc[ :]' tools/nbcc/*.c > "$tmp/out"
check "nbcc's messages all go through nbcc_error / nbcc_usage_error" $(($(wc -l < "$tmp/out") != 0)) "$(cat "$tmp/out")"

# ---- the demo: every rank's line, then the summary, which tells the truth ----
overlap() { # NAME COMMAND...: rank lines in order, the summary last
    name=$1
    shift
    timeout 300 "$@" > "$tmp/out" 2>&1
    echo $? > "$tmp/rc"
    n=$(grep -c '^rank ' "$tmp/out")
    awk -v n="$n" '/^rank / { if ($2 != (r + 0) ":") bad = 1; r++ } /^summary:/ { if (r != n || NR != n + 1) bad = 1; s++ }
                   END { exit bad || s != 1 || n < 1 }' "$tmp/out"
    check "$name: every rank's line in order, then the summary" $? "$(cat "$tmp/out")"
}
overlap "make demo" $MPIEXEC -n 4 "$BINDIR/overlap"
overlap "the README's star" env NBC_SCHEDULE_PATH=examples NBC_ALLREDUCE=star $MPIEXEC -n 4 "$BINDIR/overlap"
grep -q "^summary: 4 ranks, all verified OK" "$tmp/out" && ! grep -q "saved -" "$tmp/out" &&
    ! grep -q "saved .* (-" "$tmp/out"
check "the summary never shows a negative saving" $? "$(tail -n 1 "$tmp/out")"
overlap "a failed allreduce" env NBC_ALLREDUCE=ring $MPIEXEC -n 2 "$BINDIR/overlap" 1
grep -q "^summary: 2 ranks, SOME CHECKS FAILED" "$tmp/out" && ! grep -q "saved\|ideal" "$tmp/out" &&
    [ "$(cat "$tmp/rc")" -ne 0 ]
check "a failed allreduce reports no saving and exits non-zero" $? "$(tail -n 1 "$tmp/out")"

# ---- the library's messages: one plain line; the one docs/selection.md quotes ----
want=$(awk '/NBC_ALLREDUCE=ring mpiexec.mpich -n 4 bin\/overlap 2` prints$/ { getline; split($0, q, "`"); print q[2] }' docs/selection.md)
NBC_ALLREDUCE=ring timeout 120 $MPIEXEC -n 4 "$BINDIR/overlap" 2 > "$tmp/out" 2>&1
[ -n "$want" ] && grep -qxF "rank 0: allreduce FAILED: $want" "$tmp/out"
check "docs/selection.md quotes the error a forced ring prints today" $? "want '$want', got: $(head -n 1 "$tmp/out")"
printf 'schedule broken implements allreduce\n{\n    round { send recvbuf to rank +; }\n}\n' > "$tmp/dir/bad.nbs"
rm "$tmp/dir/allreduce_star.nbs"
NBC_SCHEDULE_PATH=$tmp/dir timeout 120 $MPIEXEC -n 1 "$BINDIR/overlap" 10 > "$tmp/out" 2>&1
grep -qx "rank 0: allreduce FAILED: nbc_init failed: NBC_SCHEDULE_PATH: $tmp/dir/bad.nbs:3:35: syntax error, unexpected ';'" "$tmp/out"
check "a syntax error reaches nbc_error_message as one plain line" $? "$(head -n 3 "$tmp/out")"

# ---- environment ----
NBC_SCHEDULE_PATH=/nonexistent:examples NBC_ALLREDUCE=star timeout 120 $MPIEXEC -n 2 "$BINDIR/overlap" 1000 > "$tmp/out" 2>&1
grep -q "^summary: 2 ranks, all verified OK" "$tmp/out"
check "NBC_SCHEDULE_PATH skips a directory that does not exist" $? "$(head -n 3 "$tmp/out")"
missing=""
for v in $(grep -rhoE '(getenv|env_[a-z]+)\("[A-Z_]+"|"(MPI_LOCALNRANKS|OMPI_COMM_WORLD_LOCAL_SIZE)"' runtime | grep -oE '[A-Z_]{4,}' | sort -u); do
    grep -q "\`$v" docs/api.md || missing="$missing $v"
done
check "docs/api.md names every environment variable the library reads" $((${#missing} != 0)) "missing:$missing"

# ---- packages: test-only ones for make test; NO_DEPS=1 skips the step ----
make -n --no-print-directory all BUILD="$tmp/nodeps" BINDIR="$tmp/nodeps/bin" NO_DEPS=1 > "$tmp/out" 2>&1
! grep -q "install-deps" "$tmp/out"
check "make NO_DEPS=1 installs nothing" $? "$(grep install-deps "$tmp/out")"
make -n --no-print-directory all BUILD="$tmp/deps" BINDIR="$tmp/deps/bin" > "$tmp/out" 2>&1
grep "install-deps" "$tmp/out" > "$tmp/deps"
grep -q "flex" "$tmp/deps" && ! grep -q "libxml2-utils\|clang" "$tmp/deps"
check "make installs the build's packages, not the tests' ones" $? "$(cat "$tmp/deps")"
grep -q "NO_DEPS=1" README.md
check "the README documents make NO_DEPS=1" $?

# ---- docs stand alone: no notes outside the repository ----
grep -rnE "reference/|shared/|design notes|reference notes" README.md docs runtime tools schedules tests/*.c > "$tmp/out"
check "docs cite published sources, not notes outside the repository" $(($(wc -l < "$tmp/out") != 0)) "$(head -n 5 "$tmp/out")"
grep -q "nbc_init is optional" runtime/nbc.h && grep -q "and so is nbc_finalize" runtime/nbc.h &&
    grep -q "int nbc_finalize(void);.*else MPI_Finalize does it" docs/api.md
check "nbc.h and docs/api.md agree that nbc_finalize is optional" $?

# ---- nbcc tune keeps the built-in choice unless beaten clearly, and says which ----
timeout 300 $MPIEXEC -n 2 "$nbcc" tune --sizes 8,4096 --reps 3 -o "$tmp/tuned.rules" 2> "$tmp/err"
rc=$?
[ "$rc" -eq 0 ] && [ "$(grep -c '^allreduce p == 2 .* -> .*# .* at [0-9]* B (\(the \)\{0,1\}built-in' "$tmp/tuned.rules")" -eq 2 ]
check "nbcc tune writes one rule per size, each saying how it stands to the built-in choice" $? \
    "exit $rc: $(cat "$tmp/tuned.rules" "$tmp/err" | tail -n 5)"

# ---- installing: pkg-config, a static link and CMake, from outside the tree ----
BINDIR=$BINDIR sh tests/install.sh
