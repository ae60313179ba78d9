package reference

import "testing"

func TestParseSwitches(t *testing.T) {
	status := "Name:\tosb-gateway\nState:\tS (sleeping)\nThreads:\t7\n" +
		"voluntary_ctxt_switches:\t1200\nnonvoluntary_ctxt_switches:\t34\n"
	n, err := parseSwitches([]byte(status))
	if err != nil || n != 1234 {
		t.Fatalf("parseSwitches = %d, %v; want 1234", n, err)
	}
	for name, bad := range map[string]string{
		"neither":       "Name:\tx\nState:\tR\n",
		"one of them":   "voluntary_ctxt_switches:\t5\n",
		"not a number":  "voluntary_ctxt_switches:\tfive\nnonvoluntary_ctxt_switches:\t1\n",
		"no final LF":   "voluntary_ctxt_switches:\t5\nnonvoluntary_ctxt_switches:",
		"negative sign": "voluntary_ctxt_switches:\t-\nnonvoluntary_ctxt_switches:\t1\n",
	} {
		if n, err := parseSwitches([]byte(bad)); err == nil {
			t.Errorf("%s: parseSwitches(%q) = %d, want an error", name, bad, n)
		}
	}
}
