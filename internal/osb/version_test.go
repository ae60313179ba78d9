package osb

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseVersion(t *testing.T) {
	tests := []struct {
		name, in string
		want     Version
	}{
		{"oldest", "2.0", Version{2, 0}},
		{"two digit minor", "2.14", Version{2, 14}},
		{"latest", "2.17", Version{2, 17}},
		{"zero", "0.0", Version{0, 0}},
		{"major three", "3.1", Version{3, 1}},
		{"six digits", "999999.999999", Version{999999, 999999}},
		{"zero minor after ten", "10.0", Version{10, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseVersion(tt.in)
			if err != nil {
				t.Fatalf("ParseVersion(%q) = %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseVersion(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
			if s := got.String(); s != tt.in {
				t.Errorf("ParseVersion(%q).String() = %q", tt.in, s)
			}
		})
	}
}

func TestParseVersionRejects(t *testing.T) {
	tests := []struct{ name, in string }{
		{"empty", ""},
		{"major only", "2"},
		{"trailing dot", "2."},
		{"leading dot", ".1"},
		{"dot only", "."},
		{"v prefix", "v2.1"},
		{"patch", "2.1.0"},
		{"leading space", " 2.1"},
		{"trailing space", "2.1 "},
		{"trailing newline", "2.1\n"},
		{"plus sign", "+2.1"},
		{"minus sign", "-2.1"},
		{"negative minor", "2.-1"},
		{"leading zero major", "02.1"},
		{"leading zero minor", "2.01"},
		{"double zero", "00.0"},
		{"seven digit major", "1000000.0"},
		{"seven digit minor", "2.1000000"},
		{"huge", "99999999999999999999.1"},
		{"overflow", "2.9223372036854775808"},
		{"comma", "2,1"},
		{"underscore", "2.1_0"},
		{"hex", "0x2.1"},
		{"exponent", "2e1.1"},
		{"full-width digits", "２.１"},
		{"two dots", "2..1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseVersion(tt.in)
			if err == nil {
				t.Fatalf("ParseVersion(%q) = %v, want an error", tt.in, got)
			}
			if !errors.Is(err, ErrVersionSyntax) {
				t.Errorf("ParseVersion(%q) error %v does not wrap ErrVersionSyntax", tt.in, err)
			}
			if got != (Version{}) {
				t.Errorf("ParseVersion(%q) = %v with an error, want the zero Version", tt.in, got)
			}
		})
	}
}

func TestVersionOrder(t *testing.T) {
	tests := []struct {
		name       string
		v, o       Version
		less, atLe bool
	}{
		{"equal", Version{2, 14}, Version{2, 14}, false, true},
		{"older minor", Version{2, 13}, Version{2, 14}, true, false},
		{"minor compares as a number", Version{2, 9}, Version{2, 10}, true, false},
		{"newer minor", Version{2, 15}, Version{2, 14}, false, true},
		{"older major wins over minor", Version{1, 99}, Version{2, 0}, true, false},
		{"newer major wins over minor", Version{3, 0}, Version{2, 17}, false, true},
		{"zero is oldest", Version{}, Oldest, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.v.Less(tt.o); got != tt.less {
				t.Errorf("%v.Less(%v) = %v, want %v", tt.v, tt.o, got, tt.less)
			}
			if got := tt.v.AtLeast(tt.o); got != tt.atLe {
				t.Errorf("%v.AtLeast(%v) = %v, want %v", tt.v, tt.o, got, tt.atLe)
			}
		})
	}
}

func TestVersionText(t *testing.T) {
	var v Version
	if err := v.UnmarshalText([]byte("2.15")); err != nil {
		t.Fatalf("UnmarshalText(2.15) = %v", err)
	}
	b, err := v.MarshalText()
	if err != nil || string(b) != "2.15" {
		t.Errorf("MarshalText() = %q, %v; want \"2.15\"", b, err)
	}
	if err := v.UnmarshalText([]byte("2.x")); err == nil {
		t.Errorf("UnmarshalText(2.x) = nil, want an error")
	}
	if v != (Version{2, 15}) {
		t.Errorf("failed UnmarshalText changed the version to %v", v)
	}
}

// FuzzParseVersion checks that ParseVersion accepts exactly the canonical
// MAJOR.MINOR strings: whatever it accepts formats back to the same string,
// and every version of up to six digits per part parses from its String.
func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"2.0", "2.14", "2.17", "0.0", "2", "2.", ".1", "v2.1", "2.1.0",
		" 2.1", "+2.1", "02.1", "99999999999999999999.1", "2.-1", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVersion(s)
		if err != nil {
			if !errors.Is(err, ErrVersionSyntax) {
				t.Errorf("ParseVersion(%q) error %v does not wrap ErrVersionSyntax", s, err)
			}
			return
		}
		if got := v.String(); got != s {
			t.Errorf("ParseVersion(%q) = %v, which formats as %q", s, v, got)
		}
		if v.Major < 0 || v.Minor < 0 || v.Major > 999999 || v.Minor > 999999 {
			t.Errorf("ParseVersion(%q) = %+v, out of range", s, v)
		}
	})
}

// FuzzVersionRoundTrip checks that String and ParseVersion are inverses for
// every version ParseVersion can represent.
func FuzzVersionRoundTrip(f *testing.F) {
	f.Add(uint32(2), uint32(14))
	f.Add(uint32(0), uint32(0))
	f.Add(uint32(999999), uint32(1000000))
	f.Fuzz(func(t *testing.T, major, minor uint32) {
		v := Version{int(major), int(minor)}
		got, err := ParseVersion(v.String())
		if major > 999999 || minor > 999999 {
			if err == nil {
				t.Errorf("ParseVersion(%q) = %v, want an error for more than six digits", v.String(), got)
			}
			return
		}
		if err != nil {
			t.Fatalf("ParseVersion(%q) = %v", v.String(), err)
		}
		if got != v {
			t.Errorf("ParseVersion(%q) = %+v, want %+v", v.String(), got, v)
		}
	})
}
