package cryptosvc

import (
	"fmt"
	"slices"

	"github.com/cipherd/cipherd/kernels"
)

// SizeClass names the implementation of an AEAD for one-shot messages of at
// most MaxSize bytes of plaintext (and more than the previous class's). The
// ciphertext is the same whichever implementation makes it; what differs is
// the speed at each size: the widest kernels win on long messages and can
// lose on short ones, where their set-up is most of the work
// (selftest.Selection.SizeClasses measures it on the host).
type SizeClass struct {
	MaxSize int
	Impl    *kernels.Implementation
}

// sizeClasses checks the classes of one AEAD: ascending sizes, each
// implementation of that AEAD, available, and passing the format's known
// answers.
func sizeClasses(c kernels.Cipher, classes []SizeClass) ([]SizeClass, error) {
	classes = slices.Clone(classes)
	for i, sc := range classes {
		switch {
		case sc.Impl == nil || sc.Impl.Cipher() != c || !sc.Impl.Available():
			return nil, fmt.Errorf("%w: Config.SizeClasses(%s) names %v", ErrInvalidConfig, c, sc.Impl)
		case i > 0 && sc.MaxSize <= classes[i-1].MaxSize, sc.MaxSize < 0:
			return nil, fmt.Errorf("%w: Config.SizeClasses(%s): sizes must ascend", ErrInvalidConfig, c)
		}
		if err := selfTestOnce(sc.Impl); err != nil {
			return nil, err
		}
	}
	return classes, nil
}

// forSize returns the implementation for a one-shot message of n bytes of
// AEAD c: its size class's, or im (the chunk-size choice) past the last.
func (s *Service) forSize(c kernels.Cipher, im *kernels.Implementation, n int) *kernels.Implementation {
	for _, sc := range s.classes[aeadID(c)] {
		if n <= sc.MaxSize {
			return sc.Impl
		}
	}
	return im
}
