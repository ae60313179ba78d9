package osb

import (
	"errors"
	"fmt"
	"strconv"
)

// Version is an OSB API version such as 2.15.
type Version struct {
	Major int
	Minor int
}

// Well-known versions.
var (
	// Latest is the newest API version this project understands.
	Latest = Version{2, 17}
	// Oldest is the oldest API version this project understands.
	Oldest = Version{2, 0}
)

// ErrVersionSyntax reports a version string that is not MAJOR.MINOR.
var ErrVersionSyntax = errors.New("not of the form MAJOR.MINOR")

// ParseVersion parses "MAJOR.MINOR" where both parts are unsigned decimal
// integers without signs, spaces or leading zeros beyond a single "0".
func ParseVersion(s string) (Version, error) {
	dot := -1
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			if dot >= 0 {
				return Version{}, fmt.Errorf("%q is %w", s, ErrVersionSyntax)
			}
			dot = i
		} else if s[i] < '0' || s[i] > '9' {
			return Version{}, fmt.Errorf("%q is %w", s, ErrVersionSyntax)
		}
	}
	if dot <= 0 || dot == len(s)-1 {
		return Version{}, fmt.Errorf("%q is %w", s, ErrVersionSyntax)
	}
	major, err1 := parsePart(s[:dot])
	minor, err2 := parsePart(s[dot+1:])
	if err1 != nil || err2 != nil {
		return Version{}, fmt.Errorf("%q is %w", s, ErrVersionSyntax)
	}
	return Version{Major: major, Minor: minor}, nil
}

func parsePart(s string) (int, error) {
	if len(s) > 1 && s[0] == '0' {
		return 0, ErrVersionSyntax
	}
	if len(s) > 6 {
		return 0, ErrVersionSyntax
	}
	return strconv.Atoi(s)
}

// MustParseVersion is ParseVersion for constants; it panics on error.
func MustParseVersion(s string) Version {
	v, err := ParseVersion(s)
	if err != nil {
		panic(err)
	}
	return v
}

// String formats v as MAJOR.MINOR.
func (v Version) String() string {
	return strconv.Itoa(v.Major) + "." + strconv.Itoa(v.Minor)
}

// Less reports whether v is older than o.
func (v Version) Less(o Version) bool {
	if v.Major != o.Major {
		return v.Major < o.Major
	}
	return v.Minor < o.Minor
}

// AtLeast reports whether v is o or newer.
func (v Version) AtLeast(o Version) bool { return !v.Less(o) }

// IsZero reports whether v is the zero Version (unset).
func (v Version) IsZero() bool { return v == Version{} }

// MarshalText implements encoding.TextMarshaler.
func (v Version) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (v *Version) UnmarshalText(b []byte) error {
	p, err := ParseVersion(string(b))
	if err != nil {
		return err
	}
	*v = p
	return nil
}
