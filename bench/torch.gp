# make bench-torch's figure: one panel per run (nbc on shared memory, nbc over TCP, ranks that
# produce gradients in different orders); for each backend the median over turns of its
# iteration time over DDP with Gloo's in the same round, with the quartiles (below 1: faster
# than Gloo). Data: the .dat bench/torch.sh writes (a block per run: backend ratio q1 q3).
#   gnuplot -e "dat='bench/results/torch-p2.dat'; png='docs/python-p2.png'" bench/torch.gp
set terminal pngcairo size 1300,480 font ",10" noenhanced
set output png
set multiplot layout 1, 3 title "PyTorch at p = 2 (ResNet-18, batch 4, 32x32 images): iteration time over DDP with Gloo's in the same round"
set grid ytics
set xtics rotate by -35 left
set style fill solid 0.8 border -1
set boxwidth 0.6
set key off
set yrange [0:*]
set xrange [-0.6:*]
set ylabel "ratio to DDP with Gloo (median of turns, quartiles)"
titles = "'nbc on shared memory' 'nbc over TCP (as Gloo)' 'gradients in different orders per rank (branches)'"
do for [k = 0:2] {
    set title word(titles, k + 1)
    plot dat index k using 0:2:xtic(1) with boxes lc rgb "#8fb3d9", \
         '' index k using 0:2:3:4 with yerrorbars lc rgb "black" pt -1, \
         1 with lines lc rgb "#c0392b" dt 2
}
unset multiplot
