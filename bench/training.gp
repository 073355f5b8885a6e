# One training step per variant, one panel per model: the bar is the median iteration time,
# its dark top the median exposed communication (time spent waiting for gradients). Data: the
# .dat bench/training writes (a block per model: variant iteration_ms exposed_ms).
#   gnuplot -e "dat='bench/results/training-p2.dat'; png='bench/results/training-p2.png'; p=2" bench/training.gp
set terminal pngcairo size 1400,560 font ",10" noenhanced
set output png
models = system("sed -n 's/^# \\([^,]*\\),.*/\\1/p' " . dat)
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.7
set xtics rotate by -35 left
set ylabel "ms per training step (median)"
set grid ytics
set key top left
set yrange [0:*]
set multiplot layout 1, words(models) title sprintf("synthetic data-parallel step, p = %d: iteration time and exposed communication", p)
do for [m = 1:words(models)] {
    set title word(models, m)
    plot dat index (m - 1) using ($2 - $3):xtic(1) title "not waiting (compute, polling)" lc rgb "#8fb3d9", \
         '' index (m - 1) using 3 title "exposed communication" lc rgb "#c0392b"
}
unset multiplot
