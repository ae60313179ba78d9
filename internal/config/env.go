package config

import (
	"errors"
	"fmt"
	"strings"
)

// expandEnv replaces each ${NAME} in s with the value of the environment
// variable NAME, looked up with lookup. A "$" not followed by "{" is kept as
// written, so bcrypt hashes ("$2a$10$…") pass through untouched. NAME is a
// letter or "_" followed by letters, digits and "_". A variable that is set
// to the empty string expands to the empty string; one that is not set is
// an error naming it. The error never contains s, which may be a secret.
//
// There is no escape for a literal "${": put such a value in a file and
// name it with password_file, whose contents are not expanded.
func expandEnv(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	var missing []string
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return "", errors.New(`has "${" without a closing "}"`)
		}
		name := s[i+2 : i+2+end]
		if !validEnvName(name) {
			return "", fmt.Errorf("${%s} does not name an environment variable (letters, digits and _, not starting with a digit)", name)
		}
		if val, ok := lookup(name); ok {
			b.WriteString(val)
		} else {
			missing = append(missing, name)
		}
		s = s[i+2+end+1:]
	}
	switch len(missing) {
	case 0:
		return b.String(), nil
	case 1:
		return "", fmt.Errorf("environment variable %s is not set", missing[0])
	default:
		return "", fmt.Errorf("environment variables %s are not set", strings.Join(missing, ", "))
	}
}

// validEnvName reports whether name is a portable environment variable
// name: [A-Za-z_][A-Za-z0-9_]*.
func validEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
