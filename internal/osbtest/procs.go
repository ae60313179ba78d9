package osbtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// What the tests and the fault campaign that run a real PostgreSQL share:
// where its programs are, and the processes of a server (its postmaster's
// children, each in a session of its own), read from /proc.

// PostgresBin returns the directory holding initdb and postgres: the
// newest major version under /usr/lib/postgresql (Debian's layout), else
// the one on PATH; "" if there is none.
func PostgresBin() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d
		}
	}
	initdb, err1 := exec.LookPath("initdb")
	_, err2 := exec.LookPath("postgres")
	if err1 != nil || err2 != nil {
		return ""
	}
	return filepath.Dir(initdb)
}

func isExec(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// Children returns the pids whose parent is parent.
func Children(parent int) []int {
	var out []int
	files, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range files {
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if fields := statFields(pid); len(fields) > 1 && fields[1] == strconv.Itoa(parent) {
			out = append(out, pid)
		}
	}
	return out
}

// Stopped reports whether pid is stopped (SIGSTOP took effect), a zombie,
// or gone.
func Stopped(pid int) bool {
	fields := statFields(pid)
	if len(fields) == 0 {
		return true
	}
	s := fields[0]
	return s == "T" || s == "t" || s == "Z"
}

// statFields returns the fields of /proc/<pid>/stat after the command
// name: state, ppid, pgrp, …; nil if the process is gone.
func statFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')') // the name may hold spaces and parentheses
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}
