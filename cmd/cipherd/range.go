package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cipherd/cipherd/client"
	"github.com/cipherd/cipherd/cryptosvc"
)

// rangeSource opens the sealed file a range decrypt reads where it needs:
// a file, or standard input when it is a regular file (from its current
// offset). A pipe cannot be read at random.
func rangeSource(path string) (*io.SectionReader, io.ReadCloser, error) {
	var f *os.File
	var closer io.ReadCloser
	if path == "-" {
		sf, ok := stdin.(*os.File)
		if !ok {
			return nil, nil, errors.New("--range reads a sealed file at random: give it with -i FILE")
		}
		f, closer = sf, io.NopCloser(sf)
	} else {
		var err error
		if f, err = os.Open(path); err != nil {
			return nil, nil, err
		}
		closer = f
	}
	size := regularSize(f)
	off, err := f.Seek(0, io.SeekCurrent)
	if size < 0 || err != nil {
		closer.Close()
		if path == "-" {
			return nil, nil, errors.New("--range reads a sealed file at random, and standard input is not a regular file: give it with -i FILE")
		}
		return nil, nil, fmt.Errorf("--range reads a sealed file at random: %s is not a regular file", path)
	}
	return io.NewSectionReader(f, off, size), closer, nil
}

// decryptRange opens the range rg of the sealed stream in src and writes it
// to the writer sink returns, which it calls first with the range's length.
func decryptRange(ctx context.Context, c *client.Client, key string, src *io.SectionReader, rg cryptosvc.Range, aad []byte, local bool, sink func(total int64) io.Writer) error {
	total := int64(-1)
	if start, err := cryptosvc.StreamStart(src, src.Size()); err == nil {
		if _, _, n, err := cryptosvc.RangeSpan(start, src.Size(), rg); err == nil {
			total = n
		}
	}
	decrypt := c.DecryptRange
	if local {
		decrypt = c.DecryptRangeLocal
	}
	_, err := decrypt(ctx, key, sink(total), src, src.Size(), rg.Off, rg.Len, aad)
	return err
}
