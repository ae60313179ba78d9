// This file holds what a load run measures besides status and count: the
// process's CPU time and I/O counters, and the latency histogram.

package main

import (
	"fmt"
	"math/bits"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuTime returns the user+system CPU time of this process (all threads),
// plus extra's when extra is not nil.
func cpuTime(extra func() (time.Duration, error)) (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	t := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if extra != nil {
		e, err := extra()
		if err != nil {
			return 0, err
		}
		t += e
	}
	return t, nil
}

// procIO counts system calls that read and write (sockets included), from
// /proc/self/io; zero where that file cannot be read.
type procIO struct{ reads, writes int64 }

func (a procIO) plus(b procIO) procIO  { return procIO{a.reads + b.reads, a.writes + b.writes} }
func (a procIO) minus(b procIO) procIO { return procIO{a.reads - b.reads, a.writes - b.writes} }

// readProcIO returns this process's syscr and syscw counts.
func readProcIO() procIO {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return procIO{}
	}
	var p procIO
	for line := range strings.Lines(string(b)) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ": ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "syscr":
			p.reads = n
		case "syscw":
			p.writes = n
		}
	}
	return p
}

// histogram counts latencies in log-linear buckets: exact below 128 ns,
// then 128 buckets per power of two, so any value is off by less than 0.4%.
// The zero value is empty and ready; recording allocates nothing.
type histogram struct {
	counts [histBuckets]int64
	n      int64
}

const (
	histSub     = 128 // buckets per power of two; a power of two itself
	histShift   = 7   // log2(histSub)
	histBuckets = (64 - histShift + 1) * histSub
)

// record adds one latency.
func (h *histogram) record(d time.Duration) {
	h.counts[bucketOf(uint64(max(d, 0)))]++
	h.n++
}

// merge adds o's counts to h.
func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// bucketOf returns the bucket of v nanoseconds.
func bucketOf(v uint64) int {
	if v < histSub {
		return int(v)
	}
	e := bits.Len64(v) - histShift - 1 // v>>e is in [histSub, 2*histSub)
	return (e+1)*histSub + int(v>>e) - histSub
}

// bucketMid returns the middle of bucket i, in nanoseconds.
func bucketMid(i int) float64 {
	if i < histSub {
		return float64(i)
	}
	e := i/histSub - 1
	lo := uint64(i%histSub+histSub) << e
	return float64(lo) + float64(uint64(1)<<e)/2
}

// quantile returns the latency at quantile q (0 < q ≤ 1), or 0 when the
// histogram is empty.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(bucketMid(i))
		}
	}
	return 0
}
