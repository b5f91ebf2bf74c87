package cryptosvc

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"testing"
)

// FuzzDecryptSources opens any input through every source and path of
// stream_push_test.go and checks that they agree with the plain read loop
// (DecryptReader.Read from a source with Read only): the same plaintext,
// the same error.
func FuzzDecryptSources(f *testing.F) {
	s := fzService(f)
	cts, contexts := fzSeeds(f, s)
	for i := range cts {
		f.Add(cts[i], contexts[i], uint64(i))
	}
	f.Fuzz(func(t *testing.T, ct, msgContext []byte, seed uint64) {
		ctx := context.Background()
		var want []byte
		d, werr := s.DecryptReader(ctx, "", readOnly{bytes.NewReader(ct)}, msgContext)
		if werr == nil {
			want, werr = io.ReadAll(d)
		}
		wantErr := fzSentinel(werr)
		if werr != nil && wantErr == nil {
			t.Fatalf("Read: %v is not a sentinel", werr)
		}
		rng := rand.New(rand.NewPCG(seed, 1))
		for _, src := range sources {
			var out bytes.Buffer
			d, err := s.DecryptReader(ctx, "", src.new(ct, rng), msgContext)
			if err == nil {
				_, err = d.WriteTo(&out)
			}
			if fzSentinel(err) != wantErr || !bytes.Equal(out.Bytes(), want) {
				t.Fatalf("WriteTo from %s: %d bytes, %v; Read: %d bytes, %v", src.name, out.Len(), err, len(want), werr)
			}
			out.Reset()
			dw := s.DecryptWriter(ctx, "", &out, msgContext)
			_, err = io.Copy(dw, src.new(ct, rng))
			if err == nil {
				err = dw.Close()
			}
			if fzSentinel(err) != wantErr || !bytes.Equal(out.Bytes(), want) {
				t.Fatalf("io.Copy to DecryptWriter from %s: %d bytes, %v; Read: %d bytes, %v", src.name, out.Len(), err, len(want), werr)
			}
		}
	})
}
