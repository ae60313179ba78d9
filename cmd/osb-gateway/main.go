// Command osb-gateway is a reverse-proxy gateway in front of Open Service
// Broker API brokers.
//
//	osb-gateway [serve] [-config gateway.yaml]   run the gateway
//	osb-gateway demo [-addr 127.0.0.1:8080]      run a sample broker behind the gateway
//	osb-gateway check [-config gateway.yaml]     validate a configuration file, lint the brokers' catalogs
//	osb-gateway audit verify|query ...          check the audit log's hash chain, search it
//	osb-gateway version                          print the version
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = `usage: osb-gateway <command> [flags]

commands:
  serve    run the gateway (the default): -config FILE (default gateway.yaml)
  demo     run the sample broker behind the gateway on loopback: -addr HOST:PORT
  check    validate a configuration file and lint the brokers' catalogs: -config FILE [-offline]
  audit    check or search audit files: audit verify FILE..., audit query -file F [-instance ID] [-tenant T]
           [-broker B] [-status 4xx] [-since T] [-until T]
  version  print the version

Run "osb-gateway <command> -h" for a command's flags.
`

// run dispatches a subcommand and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return runServe(args, stderr)
	case "demo":
		return runDemo(args, stdout, stderr)
	case "check":
		return runCheck(args, stdout, stderr)
	case "audit":
		return runAudit(args, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "osb-gateway", version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "osb-gateway: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
}
