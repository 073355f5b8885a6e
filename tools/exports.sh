#!/bin/sh
# Prints the names of the functions a header declares with the nbc_ prefix, one a line: the
# symbols the libraries export (everything else stays inside them).
grep -oE '^[A-Za-z_][A-Za-z_ *]*[ *](nbc_[a-z0-9_]+)\(' "$1" | sed -E 's/.*[ *](nbc_[a-z0-9_]+)\($/\1/' | sort -u
