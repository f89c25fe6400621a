#!/usr/bin/perl
# emu_cu.pl — rewrites a .cu file into C++ for the host emulation
# (`make CUDA=emu`, tests/cuda_emu/include/cuda_runtime.h):
#   k<<<grid, block[, smem[, stream]]>>>(args)
#     -> rl_emu_launch("k", rl_emu_key(k), rl_emu_cfg(grid, block, ...), [&] { k(args); })
#   extern __shared__ [__align__(n)] T name[];  ->  T *name = (T *)rl_emu_dyn_smem();
# A launch whose kernel is a template must name its arguments (k<F><<<...>>>).
# Usage: emu_cu.pl in.cu > out.cpp (a #line keeps compiler messages on in.cu).
use strict;
use warnings;
local $/;
my $in = shift or die "usage: emu_cu.pl file.cu\n";
open(my $fh, '<', $in) or die "emu_cu.pl: $in: $!\n";
my $s = <$fh>;
close $fh;
my $shared = ($s =~ s/extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?(\w+)\s+(\w+)\s*\[\]\s*;/$1 *$2 = ($1 *)rl_emu_dyn_smem();/g) || 0;
my $launches = ($s =~ s{([A-Za-z_]\w*(?:<[^<>;()]*>)?)\s*<<<(.*?)>>>\s*(\((?:[^()]++|(?3))*\))}
                      {rl_emu_launch("$1", rl_emu_key($1), rl_emu_cfg($2), [&] { $1$3; })}gs) || 0;
die "emu_cu.pl: $in: a launch left unrewritten\n" if $s =~ /<<</;
die "emu_cu.pl: $in: no launch found\n" unless $launches;
print "#line 1 \"$in\"\n", $s;
