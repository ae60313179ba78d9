// Package clockjump lets the fault campaign (bench/campaign) step one
// gateway process's wall clock, as an NTP step or an operator's date
// command would. Wall is the wall clock the gateway reads: time.Now in a
// real build. Built with the tag campaign_clock, it is time.Now moved by an
// offset read from the file the environment variable OSB_GATEWAY_CLOCK_FILE
// names (a Go duration such as "-90s"), read when the process starts and
// again whenever the file changes, and acknowledged by writing the offset
// in force to that file plus ".ack". Never build a gateway you run for
// anyone with the tag.
package clockjump

// EnvFile is the environment variable that names the offset file of a
// build with the tag campaign_clock.
const EnvFile = "OSB_GATEWAY_CLOCK_FILE"

// Tag is the build tag that turns the offset on.
const Tag = "campaign_clock"
