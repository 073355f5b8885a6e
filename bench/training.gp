# One panel per model. Top: the median iteration time of each variant, its dark top the median
# exposed communication (time spent waiting for gradients). Bottom: each round's iteration time
# over the best MPI variant's in the same round, median and quartiles (the figure that load from
# other work on the machine disturbs least). Data: the .dat bench/training writes (a block per
# model: variant iteration_ms exposed_ms ratio ratio_p25 ratio_p75).
#   gnuplot -e "dat='bench/results/training-p2.dat'; png='bench/results/training-p2.png'; p=2" bench/training.gp
set terminal pngcairo size 1600,900 font ",10" noenhanced
set output png
models = system("sed -n 's/^# \\([^,]*\\),.*/\\1/p' " . dat)
set multiplot layout 2, words(models) title sprintf("synthetic data-parallel step, p = %d: iteration time, exposed communication, ratio to the best MPI variant", p)
set grid ytics
set xtics rotate by -35 left
set rmargin 14 # room for the right panels' last label (nbc_equal_thread_shm), which runs past their edge
do for [m = 1:words(models)] {
    set title word(models, m)
    set style data histograms
    set style histogram rowstacked
    set style fill solid 0.85 border -1
    set boxwidth 0.7
    set key top left horizontal
    set ylabel "ms per training step (median)"
    set yrange [0:*]
    set offsets 0, 0, graph 0.15, 0 # room for the key
    plot dat index (m - 1) using ($2 - $3):xtic(1) title "not waiting (compute, polling)" lc rgb "#8fb3d9", \
         '' index (m - 1) using 3 title "exposed communication" lc rgb "#c0392b"
}
do for [m = 1:words(models)] {
    set title word(models, m) . ": ratio to the best MPI variant, same round (median, quartiles)"
    set style fill solid 0.85 border -1
    set boxwidth 0.6
    set key off
    set offsets 0, 0, 0, 0
    set ylabel "iteration time / best MPI's"
    set yrange [0.6:1.6]
    set xrange [-0.6:*]
    plot dat index (m - 1) using 0:4:xtic(1) with boxes lc rgb "#8fb3d9", \
         '' index (m - 1) using 0:4:5:6 with yerrorbars lc rgb "black" pt 7 ps 0.5, \
         1 with lines lc rgb "#c0392b" dt 2
    unset xrange
}
unset multiplot
