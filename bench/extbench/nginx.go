// This file runs nginx as the reference proxy, as bench/loadbench does: a
// generated nginx.conf in a temporary directory and nginx in the foreground
// as a child process; its CPU time is its master's and its workers'.

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"
)

// nginxConf: one upstream with an idle keep-alive pool larger than the
// connection counts, HTTP/1.1 to the broker, the broker's credentials in
// place of the platform's, no access log, client connections kept for as
// many requests as the benchmark sends, one worker per core.
var nginxConf = template.Must(template.New("nginx.conf").Parse(`# written by osb-gateway bench/extbench
worker_processes auto;
pid {{.Dir}}/nginx.pid;
error_log {{.Dir}}/error.log warn;
events {
    worker_connections 4096;
}
http {
    access_log off;
    client_body_temp_path {{.Dir}}/client_body;
    proxy_temp_path {{.Dir}}/proxy;
    keepalive_requests 100000000;
    keepalive_timeout 120s;
    upstream broker {
        server {{.Broker}};
        keepalive 256;
        keepalive_requests 100000000;
        keepalive_timeout 120s;
    }
    server {
        listen {{.Listen}};
        location / {
            proxy_pass http://broker;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Authorization "{{.Auth}}";
        }
    }
}
`))

// nginxVersion returns nginx's version ("nginx/1.22.1"), or "" when no
// nginx binary is on PATH.
func nginxVersion() string {
	path, err := exec.LookPath("nginx")
	if err != nil {
		return ""
	}
	out, err := exec.Command(path, "-v").CombinedOutput()
	if err != nil {
		return "nginx (version unknown)"
	}
	return strings.TrimSpace(strings.TrimPrefix(string(out), "nginx version: "))
}

// startNginx starts nginx in front of the broker at brokerAddr (host:port)
// in a directory under dir and returns it with its address.
func startNginx(dir, brokerAddr string) (*proc, string, error) {
	dir = filepath.Join(dir, "nginx")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	// Workers run as an unprivileged user when nginx starts as root; they
	// must reach the temporary directories nginx creates here.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, "", err
	}
	listen, err := freePort()
	if err != nil {
		return nil, "", err
	}
	var conf bytes.Buffer
	if err := nginxConf.Execute(&conf, map[string]any{
		"Dir": dir, "Broker": brokerAddr, "Listen": listen, "Auth": basic(brokerUser, brokerPass),
	}); err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), conf.Bytes(), 0o644); err != nil {
		return nil, "", err
	}
	p, tail, err := start(exec.Command("nginx", "-p", dir, "-e", filepath.Join(dir, "error.log"),
		"-c", filepath.Join(dir, "nginx.conf"), "-g", "daemon off;"))
	if err != nil {
		return nil, "", err
	}
	p.tree = true
	if err := waitListening(listen, p, tail, 5*time.Second); err != nil {
		p.stop()
		log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		return nil, "", fmt.Errorf("nginx: %w %s", err, bytes.TrimSpace(log))
	}
	return p, listen, nil
}
