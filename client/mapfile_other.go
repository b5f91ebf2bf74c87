//go:build !linux

package client

import "os"

func mapFile(*os.File, int64, int64) ([]byte, func() error, error) {
	return nil, nil, errNoMap
}

func releasePages([]byte) {}
