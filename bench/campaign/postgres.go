package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// pgProc is the PostgreSQL server of -store postgres: initdb in a
// directory of its own, then postgres on a free loopback port, durability
// off (the campaign's data need not survive the machine), as the user
// nobody when the campaign runs as root (PostgreSQL refuses root). The
// gateways reach it through a link, as they reach Redis. Its log is
// postgres.log in the campaign's directory; its data directory is removed
// when the campaign ends.
type pgProc struct {
	proc
	addr string
	data string // the data directory's parent, also the socket's directory
	bin  string // where initdb and postgres are (serve)
	cred *syscall.Credential
}

// startPostgres returns the server even with an error once it made its
// directory: stop removes what there is.
func startPostgres(dir string) (*pgProc, error) {
	bin := osbtest.PostgresBin()
	if bin == "" {
		return nil, errors.New("PostgreSQL is not installed: no initdb and postgres in /usr/lib/postgresql/*/bin or on PATH (Debian: apt-get install -y postgresql)")
	}
	p := &pgProc{proc: proc{name: "postgres"}, addr: freeAddr()}
	var err error
	// Not under dir: nobody must reach it, and dir's parents may be private.
	if p.data, err = os.MkdirTemp("", "osb-campaign-postgres-"); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			return p, fmt.Errorf("PostgreSQL refuses to run as root and there is no user nobody: %w", err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
		if err := os.Chown(p.data, int(uid), int(gid)); err != nil {
			return p, err
		}
	}
	if p.log, err = os.Create(filepath.Join(dir, "postgres.log")); err != nil {
		return p, err
	}
	initdb := p.command(filepath.Join(bin, "initdb"), "-D", filepath.Join(p.data, "data"), "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.Stdout, initdb.Stderr = p.log, p.log
	if err := initdb.Run(); err != nil {
		return p, fmt.Errorf("initdb: %w; see %s", err, p.log.Name())
	}
	p.bin = bin
	return p, p.serve()
}

// serve starts postgres on the data directory (again, after a restart
// fault) and waits until it answers.
func (p *pgProc) serve() error {
	_, port, _ := net.SplitHostPort(p.addr)
	// synchronous_commit on: a commit's WAL is written before it is
	// answered, so a kill -9 of the server loses nothing the gateways were
	// told (fsync stays off: the machine does not crash, the page cache
	// keeps what was written).
	cmd := p.command(filepath.Join(p.bin, "postgres"), "-D", filepath.Join(p.data, "data"), "-k", p.data, "-p", port,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=on",
		"-c", "full_page_writes=off", "-c", "max_connections=200", "-c", "shared_buffers=32MB")
	cmd.Stdout, cmd.Stderr = p.log, p.log
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL // nothing outlives the campaign; its backends follow the postmaster
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	err := waitReady("postgres", func() bool {
		select {
		case <-done:
			return true
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, p.url(p.addr))
		if err != nil {
			return false
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, "SELECT 1")
		return err == nil
	})
	select {
	case <-done:
		return fmt.Errorf("postgres exited at start; see %s", p.log.Name())
	default:
	}
	p.up.Store(true)
	return err
}

// url is the connection URL of database postgres as the superuser at addr
// (the server's own, or its link's).
func (p *pgProc) url(addr string) string {
	return "postgres://postgres@" + addr + "/postgres?sslmode=disable&connect_timeout=2"
}

// command is a command of PostgreSQL's, run as nobody when root.
func (p *pgProc) command(bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Dir = p.data
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	if p.cred != nil {
		cmd.Env = append(os.Environ(), "HOME="+p.data)
	}
	return cmd
}

// pause freezes the postmaster, then every backend and auxiliary process
// it runs (each a session of its own, so not one process group): open
// connections stay open and nothing is answered, as with a hung server.
// The postmaster is stopped first and seen stopped, so that it forks no
// backend the second pass would miss.
func (p *pgProc) pause() error {
	pid := p.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return err
	}
	if err := waitStopped([]int{pid}); err != nil {
		return err
	}
	kids := osbtest.Children(pid)
	for _, c := range kids {
		_ = syscall.Kill(c, syscall.SIGSTOP)
	}
	return waitStopped(kids)
}

// resume lets the postmaster and its children run again.
func (p *pgProc) resume() error {
	pid := p.cmd.Process.Pid
	err := syscall.Kill(pid, syscall.SIGCONT)
	for _, c := range osbtest.Children(pid) {
		_ = syscall.Kill(c, syscall.SIGCONT)
	}
	return err
}

// stop ends the server at once (SIGQUIT: immediate shutdown, its children
// included; SIGKILL if that does not do) and removes its data.
func (p *pgProc) stop() {
	if p.cmd != nil {
		_ = p.resume()
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			for _, c := range osbtest.Children(p.cmd.Process.Pid) {
				_ = syscall.Kill(c, syscall.SIGKILL)
			}
			p.kill9()
		}
	}
	_ = os.RemoveAll(p.data)
}

// waitStopped waits until every pid is stopped (or gone): a signal takes
// effect when its process next runs.
func waitStopped(pids []int) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		running := 0
		for _, pid := range pids {
			if !osbtest.Stopped(pid) {
				running++
			}
		}
		if running == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d postgres processes not stopped 10 s after SIGSTOP", running)
		}
		time.Sleep(time.Millisecond)
	}
}
