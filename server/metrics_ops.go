package server

// Metrics for operators' alerts: the keystore's state, key usage flushes.
// docs/OPERATIONS.md (Metrics and alerts) gives an alert rule for each.

// writeOpsMetrics publishes the operators' metrics.
func (s *Server) writeOpsMetrics(w *expo) {
	m := s.met
	w.family("cipherd_key_usage_flush_failures_total", "counter", "Flushes of the usage counted per key version to the keystore that failed; the counts are kept for the next flush.")
	w.sample("cipherd_key_usage_flush_failures_total", float64(m.usageFlushFailures.Load()))
}
