// Package speedview renders GET /speed: the benchmark report as JSON and
// as an HTML page with a chart per cipher family and a table of figures.
//
// Package server measures the table and mounts the route: it fills a
// [Snapshot] (the host, the build, the self-test, the cipher selection and
// the latest table with its state) and answers with [NewReport] or
// [ServePage], after [Negotiate] has picked the format. openssl's text
// table and -mr lines are the table's own (selftest.SpeedResult's
// WriteTable and WriteMR), and the server writes them.
//
// The page loads nothing: its CSS is inline, its charts are inline SVG,
// and it runs no script ([ServePage] sends it with a Content-Security-Policy
// that allows no more).
//
// It renders GET /speed/fleet too: every replica's host side by side.
// The server publishes this replica's [NewHost] report to a shared
// keystore, reads the others', and answers with a [FleetView] (JSON),
// its [FleetView.WriteText] (openssl's layout) or [ServeFleetPage].
package speedview
