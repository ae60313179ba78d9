package main

import (
	"flag"
	"fmt"
	"net"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// addrOverrides are serve's -listen and -admin: the two listeners'
// addresses for a quick try, in place of listen.address and
// admin.address, kept across reloads (a reload reads the file again, and
// would otherwise log a change of address at every reload).
type addrOverrides struct{ listen, admin string }

// addrFlags defines -listen and -admin on fs.
func addrFlags(fs *flag.FlagSet) *addrOverrides {
	o := &addrOverrides{}
	fs.StringVar(&o.listen, "listen", "", "the platform listener's `address`, in place of listen.address (such as 127.0.0.1:8080)")
	fs.StringVar(&o.admin, "admin", "", "the admin listener's `address`, in place of admin.address (off: none)")
	return o
}

// load loads the configuration at path and sets the addresses given, each
// checked as the file's would be (host:port; -admin also off).
func (o *addrOverrides) load(path string) (*config.Config, error) {
	for _, f := range []struct{ flag, v string }{{"-listen", o.listen}, {"-admin", o.admin}} {
		if f.v == "" || (f.flag == "-admin" && f.v == "off") {
			continue
		}
		if _, port, err := net.SplitHostPort(f.v); err != nil || port == "" {
			return nil, fmt.Errorf("%s: must be host:port (such as 127.0.0.1:8080), got %q", f.flag, f.v)
		}
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	if o.listen != "" {
		cfg.Listen.Address = o.listen
	}
	if o.admin != "" {
		cfg.Admin.Address = o.admin
	}
	return cfg, nil
}
