package main

// A Redis without persistence that restarts: kill -9, then a new
// redis-server on the same port with nothing to load.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
)

// restartRedisEmpty kills Redis with SIGKILL and starts it again after
// f.For, as startRedis did (--save "" --appendonly no): it comes back
// empty. Every lock, inventory record and orphan the gateways kept is
// gone. The kill and the start are checked as every kill's
// (killAndRestart); that nothing could be loaded, by the absence of any
// RDB or AOF file in its directory.
func (n *nemesis) restartRedisEmpty(f *fault) error {
	r := n.c.redis
	err := killAndRestart(f, &r.proc, r.addr, func() error { return r.restart(n.c.dir) })
	for _, name := range []string{"dump.rdb", "appendonly.aof", "appendonlydir"} {
		if _, serr := os.Stat(filepath.Join(n.c.dir, name)); serr == nil {
			err = errors.Join(err, fmt.Errorf("redis restarted with %s in its directory: it may have loaded data", name))
		}
	}
	if err == nil {
		f.Did = fmt.Sprintf("redis pid %d killed, pid %d started empty", f.PID, f.NewPID)
	}
	return err
}

// restart starts redis-server again on r's port, without persistence.
func (r *redisProc) restart(dir string) error {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return err
	}
	_, port, _ := net.SplitHostPort(r.addr)
	if err := r.startCmd(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir); err != nil {
		return err
	}
	err = waitReady("redis", func() bool { return pings(r.addr) })
	if err == nil {
		r.up.Store(true)
	}
	return err
}
