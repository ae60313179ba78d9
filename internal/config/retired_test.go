package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRetiredForms: brokers[].retired decodes from a boolean, a ${NAME}
// reference to one, and the mapping form, and refuses anything else with
// the YAML path.
func TestRetiredForms(t *testing.T) {
	tests := []struct {
		name  string
		doc   string // appended to minimalYAML (the broker mysql)
		env   map[string]string
		want  Retired
		probs []string
	}{
		{name: "absent", want: Retired{}},
		{name: "true", doc: "    retired: true\n", want: Retired{On: true}},
		{name: "false", doc: "    retired: false\n", want: Retired{}},
		{name: "env reference", doc: "    retired: ${RETIRED}\n", env: map[string]string{"RETIRED": "true"}, want: Retired{On: true}},
		{name: "answer gone", doc: "    retired: {answer: gone}\n", want: Retired{On: true, Answer: RetiredGone}},
		{name: "answer forward", doc: "    retired:\n      answer: forward\n", want: Retired{On: true, Answer: RetiredForward}},
		{name: "empty mapping", doc: "    retired: {}\n", want: Retired{On: true}},
		{name: "unknown answer", doc: "    retired: {answer: vanish}\n",
			probs: []string{`brokers[0].retired.answer: must be one of forward, gone (line 11)`}},
		{name: "unknown key", doc: "    retired: {answr: gone}\n", probs: []string{"brokers[0].retired.answr: unknown key (line 11)"}},
		{name: "not a boolean", doc: "    retired: soon\n", probs: []string{"brokers[0].retired: must be true or false (line 11)"}},
		{name: "a list", doc: "    retired: [gone]\n",
			probs: []string{"brokers[0].retired: must be true, false or a mapping such as {answer: gone}, not a list (line 11)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.probs != nil {
				if diff := cmp.Diff(tt.probs, problems(t, minimalYAML+tt.doc, tt.env)); diff != "" {
					t.Errorf("problems (-want +got):\n%s", diff)
				}
				return
			}
			cfg, err := Parse([]byte(minimalYAML+tt.doc), Options{LookupEnv: func(k string) (string, bool) {
				v, ok := tt.env[k]
				return v, ok
			}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, cfg.Brokers[0].Retired); diff != "" {
				t.Errorf("Retired (-want +got):\n%s", diff)
			}
			if got, want := cfg.Brokers[0].Retired.Gone(), tt.want.Answer == RetiredGone; got != want {
				t.Errorf("Gone() = %t, want %t", got, want)
			}
		})
	}
}
