package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/bad/*.golden from the current messages")

// testEnv is the environment the testdata files see.
var testEnv = map[string]string{
	"LISTEN_ADDRESS":        "127.0.0.1:8081",
	"CF_PROD_PASSWORD":      "env-platform-password",
	"TENANT_PREFIX":         "prod",
	"MYSQL_BROKER_URL":      "https://mysql-broker.example.com:8443/osb",
	"MYSQL_BROKER_PASSWORD": "env-broker-password",
	"MYSQL_TIMEOUT":         "45s",
	"MYSQL_IDLE":            "32",
	"CF_USER":               "cloud-controller",
	"BROKER_HOST":           "mysql.example.com",
}

func lookupTestEnv(name string) (string, bool) {
	v, ok := testEnv[name]
	return v, ok
}

// TestBadGolden loads each testdata/bad/*.yaml and compares the problems
// with its .golden file.
func TestBadGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/bad/*.yaml: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			cfg, err := Load(file, WithLookupEnv(lookupTestEnv))
			var probs *Problems
			if !errors.As(err, &probs) {
				t.Fatalf("Load = %v, %v; want *Problems", cfg, err)
			}
			if cfg != nil {
				t.Errorf("Load returned a Config with problems")
			}
			got := probs.Error() + "\n"
			golden := strings.TrimSuffix(file, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("problems differ from %s (-want +got):\n%s", golden, diff)
			}
		})
	}
}

// TestGoodLoad loads each testdata/good/*.yaml, which must be valid.
func TestGoodLoad(t *testing.T) {
	files, err := filepath.Glob("testdata/good/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/good/*.yaml: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			if _, err := Load(file, WithLookupEnv(lookupTestEnv)); err != nil {
				t.Fatalf("Load(%s):\n%v", file, err)
			}
		})
	}
}

func TestProblemsSortedByLine(t *testing.T) {
	_, err := Load("testdata/bad/many-problems.yaml", WithLookupEnv(lookupTestEnv))
	var probs *Problems
	if !errors.As(err, &probs) {
		t.Fatalf("Load error = %v, want *Problems", err)
	}
	if probs.Len() < 15 {
		t.Errorf("got %d problems, want at least 15 from many-problems.yaml", probs.Len())
	}
	for i := 1; i < len(probs.List); i++ {
		if probs.List[i].Line < probs.List[i-1].Line {
			t.Errorf("problem %d (line %d) sorts after problem %d (line %d):\n%s\n%s",
				i, probs.List[i].Line, i-1, probs.List[i-1].Line, probs.List[i], probs.List[i-1])
		}
	}
}
