# The wide plot: every allreduce of one `make bench` run against message size, from the .dat
# that bench/wide.sh writes (first line: column names, MPI:variant; NaN where a run is missing).
#   gnuplot -e "dat='bench/results/wide-p2.dat'; png='bench/results/wide-p2.png'; p=2" bench/wide.gp
# Left: time per call. Right: time over the bound (the column named mpich:bound), so the bound
# is the line at 1. nbc's columns are solid and thick, MPI's dashed, Gloo's thin, the TCP
# exchange (what plain sockets take for the same bytes) dotted.
set terminal pngcairo size 1500,640 font ",10" noenhanced
set output png
set datafile missing "NaN"
set key noautotitle
header = system("head -n 1 " . dat)
ncols = words(header)
bound = 0
do for [i=2:ncols] { if (word(header, i) eq "mpich:bound") { bound = i } }
width(i) = strstrt(word(header, i), "nbc_auto") ? 3 : strstrt(word(header, i), "gloo_") ? 1 : 2
dash(i) = strstrt(word(header, i), "MPI_") ? 2 : strstrt(word(header, i), "tcp_exchange") ? 3 : 1
set logscale xy 2
set format x "%.0b%B"
set xlabel "message size (bytes)"
set grid
set multiplot title sprintf("allreduce of doubles (sum), p = %d: nbc, MPICH, Open MPI, Gloo (TCP), the bound", p)
set ylabel "time per call (us)"
set format y "%g"
set logscale y 10
set key off
set origin 0, 0
set size 0.42, 0.94
plot for [i=2:ncols] dat using 1:i with linespoints lw width(i) dt dash(i) pt 7 ps 0.4 title word(header, i)
set ylabel "time / bound"
set key outside right top
set origin 0.42, 0
set size 0.58, 0.94
if (bound > 0) {
    plot for [i=2:ncols] dat using 1:(column(i) / column(bound)) with linespoints lw width(i) dt dash(i) pt 7 ps 0.4 title word(header, i)
} else {
    plot for [i=2:ncols] dat using 1:i with linespoints lw width(i) dt dash(i) pt 7 ps 0.4 title word(header, i)
}
unset multiplot
