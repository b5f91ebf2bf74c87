//go:build !linux

package main

import (
	"errors"
	"os"
)

func allocate(*os.File, int64) error { return errors.ErrUnsupported }
