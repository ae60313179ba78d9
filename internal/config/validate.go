package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/go-playground/validator/v10"
)

// validate is the validator for Config, built on first use. A
// *validator.Validate is safe for concurrent use and caches struct metadata.
var validate = sync.OnceValue(newValidator)

// newValidator returns a validator that names fields by their yaml keys and
// knows the gateway's own tags:
//
//	hostport         host:port with a numeric port 0–65535; the host may be
//	                 empty, a name, or an IP address ("[::1]:8080")
//	hostport_or_off  hostport, or "off"
func newValidator() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			return ""
		}
		return name
	})
	mustRegister(v, "hostport", func(fl validator.FieldLevel) bool {
		return checkHostPort(fl.Field().String()) == ""
	})
	mustRegister(v, "hostport_or_off", func(fl validator.FieldLevel) bool {
		s := fl.Field().String()
		return s == "off" || checkHostPort(s) == ""
	})
	return v
}

func mustRegister(v *validator.Validate, tag string, fn validator.Func) {
	if err := v.RegisterValidation(tag, fn); err != nil {
		panic(err)
	}
}

// validateTags runs the struct tags over c and records a problem for each
// failure.
func validateTags(c *Config, probs *Problems) {
	err := validate().Struct(c)
	var errs validator.ValidationErrors
	if !errors.As(err, &errs) {
		if err != nil {
			probs.addf("", "%v", err)
		}
		return
	}
	for _, fe := range errs {
		path := fe.Namespace()
		if _, rest, ok := strings.Cut(path, "."); ok {
			path = rest // drop the leading "Config."
		}
		probs.addf(path, "%s", tagMessage(fe))
	}
}

// tagMessage says, for a person, what a failed validator tag wanted. It
// describes the rule, never the value.
func tagMessage(fe validator.FieldError) string {
	kind := fe.Kind()
	param := fe.Param()
	switch fe.Tag() {
	case "required":
		return "is required"
	case "min", "gte":
		if param == "0" {
			return "must not be negative"
		}
		return "must be at least " + quantity(kind, param)
	case "max", "lte":
		return "must be at most " + quantity(kind, param)
	case "gt":
		return "must be more than " + quantity(kind, param)
	case "lt":
		return "must be less than " + quantity(kind, param)
	case "oneof":
		return "must be one of " + strings.Join(strings.Fields(param), ", ")
	case "hostport":
		return "must be host:port " + hostPortExamples + " (" + checkHostPort(fmt.Sprint(fe.Value())) + ")"
	case "hostport_or_off":
		return `must be "off" or host:port ` + hostPortExamples + " (" + checkHostPort(fmt.Sprint(fe.Value())) + ")"
	}
	return fmt.Sprintf("fails the %q check", fe.Tag())
}

// quantity renders a min/max parameter for the field's kind: a count of
// entries or characters for lists and strings, the bare number otherwise.
func quantity(kind reflect.Kind, param string) string {
	switch kind {
	case reflect.Slice, reflect.Map, reflect.Array:
		if param == "1" {
			return "1 entry"
		}
		return param + " entries"
	case reflect.String:
		if param == "1" {
			return "1 character"
		}
		return param + " characters"
	}
	return param
}

const hostPortExamples = `such as ":8080", "127.0.0.1:9090" or "[::1]:8080"`

// checkHostPort returns why s is not a listen address host:port, or "".
func checkHostPort(s string) string {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			return ae.Err
		}
		return "not host:port"
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 || port != strconv.Itoa(n) {
		return "the port must be a number from 0 to 65535"
	}
	if host == "" || isIPAddr(host) || validHostname(host) {
		return ""
	}
	return "the host must be empty, a host name or an IP address"
}

// isIPAddr reports whether s is an IP address, IPv6 with an optional zone.
func isIPAddr(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

// validHostname reports whether s is a DNS host name: dot-separated labels
// of letters, digits and inner hyphens.
func validHostname(s string) bool {
	if len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(s, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if c != '-' && !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
				return false
			}
		}
	}
	return true
}
