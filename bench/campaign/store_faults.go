package main

// A Redis without persistence that restarts: kill -9, then a new
// redis-server on the same port with nothing to load; the gateways refuse
// to work on it, and the nemesis plays the operator who restores the
// inventory and accepts the loss (docs/state.md, "When Redis loses its
// data").

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// operatorNotice bounds how long the operator waits for the gateways to
// notice the loss (state status says lost) before accepting it anyway;
// operatorPause is how long the operator then takes.
const (
	operatorNotice = 10 * time.Second
	operatorPause  = time.Second
)

// restartRedisEmpty takes a backup of the inventory (inventory export: the
// operator's latest, taken just before the crash, the best case), kills
// Redis with SIGKILL and starts it again after f.For, as startRedis did
// (--save "" --appendonly no): it comes back empty. Every lock, inventory
// record and orphan the gateways kept is gone. The kill and the start are
// checked as every kill's (killAndRestart); that nothing could be loaded,
// by the absence of any RDB or AOF file in its directory. Then the
// operator: wait until the gateways noticed (state status), import the
// backup and accept the loss (state accept-loss -import), after which the
// gateways serve again. f.End is the acceptance.
func (n *nemesis) restartRedisEmpty(f *fault) error {
	r := n.c.redis
	op, err := n.c.operatorConfig()
	if err != nil {
		return err
	}
	backup := filepath.Join(n.c.dir, fmt.Sprintf("backup-%d.jsonl", f.N))
	_, berr := n.c.cli("inventory", "export", "-config", op, "-o", backup)
	err = killAndRestart(f, &r.proc, r.addr, func() error { return r.restart(n.c.dir) })
	for _, name := range []string{"dump.rdb", "appendonly.aof", "appendonlydir"} {
		if _, serr := os.Stat(filepath.Join(n.c.dir, name)); serr == nil {
			err = errors.Join(err, fmt.Errorf("redis restarted with %s in its directory: it may have loaded data", name))
		}
	}
	if err != nil {
		return err
	}
	up := time.Now()
	noticed := "not noticed within " + operatorNotice.String()
	for deadline := up.Add(operatorNotice); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if out, _ := n.c.cli("state", "status", "-config", op); strings.Contains(out, "LOST") {
			noticed = fmt.Sprintf("noticed %s after the restart", time.Since(up).Round(100*time.Millisecond))
			break
		}
	}
	time.Sleep(operatorPause)
	args := []string{"state", "accept-loss", "-config", op}
	if berr == nil {
		args = append(args, "-import", backup)
	}
	out, aerr := n.c.cli(args...)
	for try := 1; aerr != nil && try < 3 && !strings.Contains(out, "nothing to accept"); try++ {
		time.Sleep(time.Second)
		out, aerr = n.c.cli(args...)
	}
	f.Did = fmt.Sprintf("redis pid %d killed, pid %d started empty at %s; %s; backup %s; %s", f.PID, f.NewPID,
		up.Format("15:04:05.000"), noticed, errOr(berr, "taken"), strings.Join(strings.Fields(out), " "))
	if aerr != nil && !strings.Contains(out, "nothing to accept") {
		return fmt.Errorf("state accept-loss: %w: %s", aerr, out)
	}
	return nil
}

func errOr(err error, ok string) string {
	if err != nil {
		return "failed: " + err.Error()
	}
	return ok
}

// operatorConfig is the operator's configuration: gw0's, reaching Redis
// directly rather than through gw0's link (which a store-partition may
// cut).
func (c *cluster) operatorConfig() (string, error) {
	g := c.gateways[0]
	raw, err := os.ReadFile(g.config)
	if err != nil {
		return "", err
	}
	via := c.storeLink.Addr()
	if g.storeLink != nil {
		via = g.storeLink.Addr()
	}
	path := filepath.Join(c.dir, "operator.yaml")
	return path, os.WriteFile(path, bytes.ReplaceAll(raw, []byte(via), []byte(c.redis.addr)), 0o600)
}

// cli runs the gateway's binary with args, as an operator would, and
// returns what it wrote.
func (c *cluster) cli(args ...string) (string, error) {
	cmd := exec.Command(c.gatewayBin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
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
