package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tessera-dev/tessera/client"
)

// queuesCmd is `tessera queues fleet|settings|group`: a queue's fleet
// view and its settings (issue 31).
func queuesCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return subcommand("queues", args, map[string]func([]string) error{
		"fleet":    func(args []string) error { return queuesFleet(ctx, args, stdout, stderr) },
		"settings": func(args []string) error { return queuesSettings(ctx, args, stdout, stderr) },
		"group":    func(args []string) error { return queuesGroup(ctx, args, stdout, stderr) },
	}, stderr)
}

// rateHelp says what --rate takes.
const rateHelp = `grants per time: N/s, N/m or N/h (a bare N is N/s; 0 or none: no limit)`

// rateFlags declares --rate and --burst on fs, and returns what reads
// them as a rate once fs is parsed.
func rateFlags(fs *flag.FlagSet) func() (*client.Rate, error) {
	rate := fs.String("rate", "", rateHelp)
	burst := fs.Int("burst", 0, "the most tokens the rate saves up (0: the rate a second, rounded up)")
	return func() (*client.Rate, error) { return parseRate(*rate, *burst) }
}

// anyGiven reports whether any of the named flags was set on the command
// line: a settings command without one only prints.
func anyGiven(fs *flag.FlagSet, names ...string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || slices.Contains(names, f.Name) })
	return given
}

// parseRate reads --rate and --burst: nil for no limit.
func parseRate(rate string, burst int) (*client.Rate, error) {
	if burst < 0 {
		return nil, usagef("--burst must be ≥ 0")
	}
	if rate == "" || rate == "none" || rate == "0" {
		if burst != 0 {
			return nil, usagef("--burst needs a --rate")
		}
		return nil, nil
	}
	num, unit, _ := strings.Cut(rate, "/")
	per := map[string]float64{"": 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}[unit]
	n, err := strconv.ParseFloat(num, 64)
	if per == 0 || err != nil || n < 0 || math.IsInf(n, 0) || math.IsNaN(n) {
		return nil, usagef("--rate %q: want %s", rate, rateHelp)
	}
	if n == 0 {
		return nil, nil
	}
	return &client.Rate{PerSecond: n / per, Burst: burst}, nil
}

// rateText shows a rate as --rate takes it.
func rateText(r *client.Rate) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%s/s burst %d", strconv.FormatFloat(r.PerSecond, 'g', -1, 64), r.Burst)
}

func timeText(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}

func secondsText(s *float64) string {
	if s == nil {
		return "-"
	}
	return (time.Duration(*s) * time.Second).String()
}

func queuesFleet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("queues fleet")
	cn := connFlags(fs, stdout, stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: tessera queues fleet QUEUE [flags]\n\nA queue's fleet: its settings, its groups, its lanes (ready tasks by group\nand requires; unmatched when no claimant seen in the last 5 minutes could\ntake them) and the capability sets seen claiming on it.\n\nflags:\n")
		printFlags(fs)
	}
	pos, c, err := cn.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	f, err := c.QueueFleet(ctx, pos[0])
	if err != nil {
		return err
	}
	return cn.print(f, func(w *tabwriter.Writer) { fleetRows(w, f) })
}

// fleetRows prints a fleet view: the settings, then a table each of the
// groups, lanes and claimants it has.
func fleetRows(w *tabwriter.Writer, f *client.Fleet) {
	settingsRows(w, &f.QueueSettings)
	if len(f.Groups) > 0 {
		fmt.Fprintln(w, "\nGROUP\tMAX_RUNNING\tRUNNING\tRATE\tCOOLDOWN_UNTIL\tLAST_GRANTED")
		for _, g := range f.Groups {
			groupRow(w, &g)
		}
	}
	if len(f.Lanes) > 0 {
		fmt.Fprintln(w, "\nLANE_GROUP\tREQUIRES\tREADY\tOLDEST\tUNMATCHED")
		for _, l := range f.Lanes {
			unmatched := "-"
			if l.Unmatched {
				unmatched = "for " + secondsText(l.UnmatchedSeconds)
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", orDash(l.Group), orDash(strings.Join(l.Requires, ",")), l.Ready,
				secondsText(l.OldestReadyAgeSeconds), unmatched)
		}
	}
	if len(f.Claimants) > 0 {
		fmt.Fprintln(w, "\nCLAIMANT_CAPABILITIES\tSEEN")
		for _, cl := range f.Claimants {
			fmt.Fprintf(w, "%s\t%s\n", orDash(strings.Join(cl.Capabilities, ",")), cl.SeenAt.Local().Format(time.DateTime))
		}
	}
}

func settingsRows(w *tabwriter.Writer, s *client.QueueSettings) {
	capText := "-"
	if s.GroupMaxRunning > 0 {
		capText = strconv.Itoa(s.GroupMaxRunning)
	}
	fmt.Fprintf(w, "queue\t%s\ngroup_max_running\t%s\nrate\t%s\n", s.Queue, capText, rateText(s.Rate))
}

func groupRow(w *tabwriter.Writer, g *client.GroupState) {
	maxText := "(queue's)"
	if g.MaxRunning != nil {
		maxText = strconv.Itoa(*g.MaxRunning)
		if *g.MaxRunning == 0 {
			maxText = "no cap"
		}
	}
	fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\n", orDash(g.Group), maxText, g.Running, rateText(g.Rate), timeText(g.CooldownUntil), timeText(g.LastGrantedAt))
}

const queuesSettingsUsage = `usage: tessera queues settings QUEUE [--group-max-running N] [--rate R [--burst N]]

Replaces a queue's fleet settings whole: a flag not given is none (no cap,
no rate). Without flags it prints the settings and changes nothing.

--group-max-running caps the live leases of each group of the queue (0: no
cap), unless a group has its own (tessera queues group). --rate limits the
queue's grants with a token bucket — N/s, N/m or N/h, e.g. 5/s or 300/m
(a bare N is N/s; 0 or none: no limit); --burst is the most tokens saved
up (default the rate a second, rounded up). A claim the rate holds back gets nothing, and is told when the next
token is there.

flags:
`

func queuesSettings(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("queues settings")
	cn := connFlags(fs, stdout, stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, queuesSettingsUsage)
		printFlags(fs)
	}
	var s client.QueueSettings
	fs.IntVar(&s.GroupMaxRunning, "group-max-running", 0, "the most live leases each group may hold at once (0: no cap)")
	rate := rateFlags(fs)
	pos, c, err := cn.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if s.GroupMaxRunning < 0 {
		return usagef("--group-max-running must be ≥ 0")
	}
	if s.Rate, err = rate(); err != nil {
		return err
	}
	given := anyGiven(fs, "group-max-running", "rate", "burst")
	out := &s
	if !given {
		f, err := c.QueueFleet(ctx, pos[0])
		if err != nil {
			return err
		}
		out = &f.QueueSettings
	} else if out, err = c.SetQueueSettings(ctx, pos[0], s); err != nil {
		return err
	}
	return cn.print(out, func(w *tabwriter.Writer) { settingsRows(w, out) })
}

const queuesGroupUsage = `usage: tessera queues group QUEUE GROUP [--max-running N] [--rate R [--burst N]] [--cooldown-until TIME]

Replaces one group's settings in a queue whole: a flag not given is none
(the queue's cap, no rate, no cooldown). Without flags it prints the group
as the fleet view shows it and changes nothing. GROUP "" is the queue's
tasks without a group.

--max-running caps the group's live leases over the queue's
group-max-running (0: no cap). --rate and --burst are the group's own
token bucket, as for tessera queues settings (e.g. --rate 2/s --burst 4).
--cooldown-until (RFC 3339) holds the group's ready tasks back until then;
the rest of the queue flows.

flags:
`

func queuesGroup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("queues group")
	cn := connFlags(fs, stdout, stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, queuesGroupUsage)
		printFlags(fs)
	}
	var s client.GroupSettings
	fs.Var(optionalInt{&s.MaxRunning}, "max-running", "the most live leases the group may hold at once, over the queue's cap (0: no cap; not given: the queue's)")
	rate := rateFlags(fs)
	cooldown := fs.String("cooldown-until", "", "RFC 3339 time before which the group's ready tasks are not granted")
	pos, c, err := cn.parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	s.Group = pos[1]
	given := anyGiven(fs, "max-running", "rate", "burst", "cooldown-until")
	if s.MaxRunning != nil && *s.MaxRunning < 0 {
		return usagef("--max-running must be ≥ 0")
	}
	if s.Rate, err = rate(); err != nil {
		return err
	}
	if *cooldown != "" {
		t, err := time.Parse(time.RFC3339, *cooldown)
		if err != nil {
			return usagef("--cooldown-until: %v", err)
		}
		s.CooldownUntil = &t
	}
	var out *client.GroupState
	if !given {
		f, err := c.QueueFleet(ctx, pos[0])
		if err != nil {
			return err
		}
		out = &client.GroupState{GroupSettings: client.GroupSettings{Group: pos[1]}}
		for i := range f.Groups {
			if f.Groups[i].Group == pos[1] {
				out = &f.Groups[i]
			}
		}
	} else if out, err = c.SetGroupSettings(ctx, pos[0], s); err != nil {
		return err
	}
	return cn.print(out, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "GROUP\tMAX_RUNNING\tRUNNING\tRATE\tCOOLDOWN_UNTIL\tLAST_GRANTED")
		groupRow(w, out)
	})
}

// optionalInt is an int flag that is nil until given.
type optionalInt struct{ p **int }

func (o optionalInt) String() string {
	if o.p == nil || *o.p == nil {
		return ""
	}
	return strconv.Itoa(**o.p)
}

func (o optionalInt) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return err
	}
	*o.p = &n
	return nil
}
