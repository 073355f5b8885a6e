#!/bin/sh
# The documentation stays a reference a user can walk: every page under docs/ is linked from
# the README or another page, every other file there is shown or linked by a page, every
# relative link points at a file that exists, and no page tells how the project was made
# (the words that give a diary away). Prints "ok NAME" or "FAIL NAME: why" per check.
# Usage: sh tests/docs.sh, from the top of the tree.
check() { # NAME STATUS [WHY]
    if [ "$2" -eq 0 ]; then echo "ok $1"; else echo "FAIL $1${3:+: $3}"; fi
}
pages="README.md $(ls docs/*.md)"

# relative links and image references of one page, resolved against its folder
links() { # PAGE
    grep -oE '\]\([^)#[:space:]]+' "$1" | sed 's/^](//' | grep -vE '^[a-z]+:' |
        while read -r l; do
            d=$(dirname "$1")
            printf '%s\n' "$d/$l" | sed 's|^\./||; s|/\./|/|g'
        done
}
# files a page names by path in its text (`docs/x.csv`, docs/x.png), as written from the top
named() { # PAGE
    grep -oE 'docs/[A-Za-z0-9_.-]+' "$1" | sed 's/[.]$//'
}

bad=""
for f in $pages; do
    for l in $(links "$f"); do
        # normalise a/b/../c
        n=$(printf '%s\n' "$l" | sed -e ':a' -e 's|[^/]*/\.\./||' -e 'ta')
        [ -e "$n" ] || bad="$bad $f→$l"
    done
done
check "every relative link in the README and docs/ points at a file that exists" "$([ -z "$bad" ]; echo $?)" "$bad"

reached=$(for f in $pages; do links "$f"; named "$f"; done | sed -e ':a' -e 's|[^/]*/\.\./||' -e 'ta' | sort -u)
orphans=""
for f in docs/*; do
    [ "$f" = docs/README.md ] && continue
    printf '%s\n' "$reached" | grep -qxF "$f" || orphans="$orphans $f"
done
check "every file in docs/ is linked or named by the README or a page" "$([ -z "$orphans" ]; echo $?)" "$orphans"

# A diary's words: sessions, waves and rounds of work, issue numbers, what a change did.
diary='\b(sessions?|waves?|issue [0-9]+|issues? #?[0-9]+|this change|before (this|the) change|previously|no longer|used to|we (tried|measured|found|added|changed)|the (first|second|third|fourth|fifth|sixth|seventh|eighth) (session|pass of work))\b'
hits=$(grep -niE "$diary" $pages | grep -viE 'MPI_Session|MPI sessions?' | head -n 10)
check "no page tells how the project was made (sessions, issues, what a change did)" "$([ -z "$hits" ]; echo $?)" "$hits"
