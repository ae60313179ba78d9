package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// maxPasswordRead bounds what hash-password reads from standard input:
// bcrypt uses at most 72 bytes, so anything much longer is a mistake.
const maxPasswordRead = 4096

// runHashPassword reads one password from stdin (the first line, its line
// ending trimmed) and prints its bcrypt hash, for tenants[].credentials[]
// password values:
//
//	printf %s "$PASSWORD" | osb-gateway hash-password
//
// The password is never echoed or logged.
func runHashPassword(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("hash-password", "hash-password [-cost N] < password\n\n"+
		"Reads a password from standard input (the first line) and prints its bcrypt hash for\n"+
		"tenants[].credentials[].password. Example: printf %s \"$PASSWORD\" | osb-gateway hash-password", stderr)
	cost := fs.Int("cost", bcrypt.DefaultCost, fmt.Sprintf("bcrypt cost, %d to %d; each step doubles the work of every first login", bcrypt.MinCost, bcrypt.MaxCost))
	if code, ok := parseFlags(fs, args, false); !ok {
		return code
	}
	if *cost < bcrypt.MinCost || *cost > bcrypt.MaxCost {
		fmt.Fprintf(stderr, "osb-gateway hash-password: -cost %d is outside %d to %d\n", *cost, bcrypt.MinCost, bcrypt.MaxCost)
		return exitUsage
	}
	pw, err := readPassword(stdin)
	if err != nil {
		fmt.Fprintf(stderr, "osb-gateway hash-password: %v\n", err)
		return exitFailed
	}
	hash, err := bcrypt.GenerateFromPassword(pw, *cost)
	if err != nil {
		fmt.Fprintf(stderr, "osb-gateway hash-password: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "%s\n", hash)
	return exitOK
}

// readPassword returns the first line of r without its line ending.
func readPassword(r io.Reader) ([]byte, error) {
	line, err := bufio.NewReaderSize(io.LimitReader(r, maxPasswordRead), maxPasswordRead).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("reading the password from standard input: %w", err)
	}
	if errors.Is(err, io.EOF) && len(line) == maxPasswordRead {
		return nil, fmt.Errorf("the password on standard input is longer than %d bytes (bcrypt uses at most 72)", maxPasswordRead)
	}
	pw := strings.TrimRight(line, "\r\n")
	switch {
	case pw == "":
		return nil, errors.New("no password on standard input (expected one line, e.g. printf %s \"$PASSWORD\" | osb-gateway hash-password)")
	case len(pw) > 72:
		return nil, fmt.Errorf("the password is %d bytes; bcrypt uses at most 72 and refuses longer ones", len(pw))
	}
	return []byte(pw), nil
}
