//go:build unix

package server

import (
	"bytes"
	"encoding/base64"
	"testing"
)

// BenchmarkHandleEncryptBatch is BenchmarkHandleEncryptJSON for a batch of
// 100 items of 64 bytes: the server's CPU per batch item (cpu-ns/item) is
// what the batch route costs beside the single-item route.
func BenchmarkHandleEncryptBatch(b *testing.B) {
	const items = 100
	item := `{"plaintext":"` + base64.StdEncoding.EncodeToString(make([]byte, 64)) + `"}`
	body := []byte(`{"items":[` + item + string(bytes.Repeat([]byte(","+item), items-1)) + `]}`)
	cpu := benchEncryptHandler(b, body)
	b.ReportMetric(cpu, "cpu-ns/op")
	b.ReportMetric(cpu/items, "cpu-ns/item")
}
