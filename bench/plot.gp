# Time and bandwidth against message size, one line per variant, from the .dat file bench
# writes (first line: column names; NaN where a schedule refuses the size).
#   gnuplot -e "dat='bench/results/bench-p2.dat'; png='bench/results/bench-p2.png'; p=2" bench/plot.gp
set terminal pngcairo size 1500,620 font ",10" noenhanced
set output png
set datafile missing "NaN"
set key autotitle columnhead
ncols = system("head -n 1 " . dat . " | wc -w") + 0
set logscale xy 2
set format x "%.0b%B"
set xlabel "message size (bytes)"
set grid
set multiplot title sprintf("allreduce of doubles (sum), p = %d: nbc against MPICH %s", p, system("mpichversion 2>/dev/null | sed -n 's/MPICH Version:[[:space:]]*//p'"))
# nbc_auto and the two MPICH calls (the last two columns) stand out; forced schedules are thin
set ylabel "time per call (us)"
set format y "%g"
set key off
set origin 0, 0
set size 0.4, 0.94
plot for [i=3:ncols-2] dat using 1:i with linespoints lw 1 pt 7 ps 0.4, \
     dat using 1:2 with linespoints lw 3 pt 7 ps 0.6 lc "black", \
     for [i=ncols-1:ncols] dat using 1:i with linespoints lw 3 dt 2 pt 5 ps 0.6
set ylabel "bandwidth (MB/s: message bytes / time)"
set logscale y 10
set key outside right top
set origin 0.4, 0
set size 0.6, 0.94
plot for [i=3:ncols-2] dat using 1:($1 / column(i)) with linespoints lw 1 pt 7 ps 0.4, \
     dat using 1:($1 / $2) with linespoints lw 3 pt 7 ps 0.6 lc "black", \
     for [i=ncols-1:ncols] dat using 1:($1 / column(i)) with linespoints lw 3 dt 2 pt 5 ps 0.6
unset multiplot
