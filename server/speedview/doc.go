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
// The server's fleet view, GET /speed/fleet, renders its own report and
// page, and takes from here what it shares with /speed: [Negotiate], the
// page's headers ([SetPageHeaders]), the summary's figures ([TableCells],
// [ProfileCells]) at its sizes ([SummarySizes]), and the formats of
// throughput and durations ([FormatMBps], [RoundDuration]).
package speedview
