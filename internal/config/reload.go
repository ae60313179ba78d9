package config

import "time"

// DefaultReloadDebounce is reload.debounce: how long the watched files must
// stay quiet after a change before the configuration is read again.
const DefaultReloadDebounce = 500 * time.Millisecond

// Reload is how the gateway notices a changed configuration without a
// signal. SIGHUP and POST /admin/reload reload whatever this says.
type Reload struct {
	// Watch makes osb-gateway serve watch the configuration file and the
	// password_file and token_file names it holds (their directories, so
	// that editors' atomic renames and Kubernetes ConfigMap and Secret
	// symlink swaps are seen) and reload when their contents change. nil:
	// true.
	Watch *bool `yaml:"watch"`
	// Debounce is how long the files must stay quiet after a change before
	// they are read, so that a change written in several steps is read
	// once. Zero value: DefaultReloadDebounce.
	Debounce time.Duration `yaml:"debounce" validate:"gt=0,lte=1m"`
}

// Watching reports whether the files are watched (true when unset).
func (r Reload) Watching() bool { return r.Watch == nil || *r.Watch }

func (r *Reload) applyDefaults() {
	setDuration(&r.Debounce, DefaultReloadDebounce)
}

// WatchedFiles returns the files a reload reads besides the configuration
// file: every password_file of the tenants' credentials and of the brokers,
// the brokers' next_password_file, auth.token_file and auth.client_secret_file,
// and admin.token_file, resolved against baseDir (the configuration file's
// directory, as Load resolves them), without duplicates.
// state.redis.password_file and state.postgres.url_file are left out: the state section needs a
// restart.
func (c *Config) WatchedFiles(baseDir string) []string {
	var files []string
	seen := map[string]bool{}
	add := func(name string) {
		if name == "" {
			return
		}
		name = resolvePath(baseDir, name)
		if !seen[name] {
			seen[name] = true
			files = append(files, name)
		}
	}
	for _, t := range c.Tenants {
		for _, cr := range t.Credentials {
			add(cr.PasswordFile)
		}
	}
	for _, b := range c.Brokers {
		add(b.PasswordFile)
		add(b.NextPasswordFile)
		if b.Auth != nil {
			add(b.Auth.TokenFile)
			add(b.Auth.ClientSecretFile)
		}
	}
	add(c.Admin.TokenFile)
	return files
}
