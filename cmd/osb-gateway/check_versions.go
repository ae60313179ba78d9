package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// reportRefusedVersions probes broker b at every version of its
// api_version range (proxy.ProbeVersions) and warns on w of those it
// refuses, e.g.
//
//	gateway.yaml: warning: broker "x" refuses X-Broker-API-Version 2.12 and below (412 IncompatibleAPIVersion); …
//
// A platform at such a version gets the broker's refusal through the
// gateway; narrowing brokers[].api_version has the gateway answer it
// itself. A probe that fails otherwise is left to the catalog check.
func reportRefusedVersions(ctx context.Context, g *proxy.Gateway, b config.Broker, path string, w io.Writer) {
	refused, _ := g.ProbeVersions(ctx, b.Name)
	if len(refused) == 0 {
		return
	}
	runs, hint := refusedRuns(b.APIVersion.Min, b.APIVersion.Max, refused)
	fmt.Fprintf(w, "%s: warning: broker %q refuses X-Broker-API-Version %s (%s); platforms at those versions get its refusal%s\n",
		path, b.Name, runs, refused[0].Answer, hint)
}

// refusedRuns names the refused versions of the range min to max by runs
// ("2.12 and below", "2.16 and above", "2.9 to 2.10", "2.14"), and the
// api_version setting that has the gateway refuse them itself ("" when
// none does: the broker refuses versions inside its range).
func refusedRuns(min, max osb.Version, refused []proxy.RefusedVersion) (runs, hint string) {
	var parts []string
	newMin, newMax := min, max
	for i := 0; i < len(refused); {
		j := i
		for j+1 < len(refused) && refused[j+1].Version.Minor == refused[j].Version.Minor+1 {
			j++
		}
		lo, hi := refused[i].Version, refused[j].Version
		switch {
		case lo == min && hi == max:
			parts = append(parts, fmt.Sprintf("%s to %s, every version of brokers[].api_version", lo, hi))
		case lo == min:
			parts = append(parts, hi.String()+" and below")
			newMin = osb.Version{Major: hi.Major, Minor: hi.Minor + 1}
		case hi == max:
			parts = append(parts, lo.String()+" and above")
			newMax = osb.Version{Major: lo.Major, Minor: lo.Minor - 1}
		case lo == hi:
			parts = append(parts, lo.String())
		default:
			parts = append(parts, fmt.Sprintf("%s to %s", lo, hi))
		}
		i = j + 1
	}
	if (newMin != min || newMax != max) && !newMax.Less(newMin) {
		hint = fmt.Sprintf(" (brokers[].api_version {min: %q, max: %q} has the gateway answer them with its own 412)", newMin, newMax)
	}
	return strings.Join(parts, ", "), hint
}
