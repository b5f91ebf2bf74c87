//go:build unix

package speedview

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
)

// The browser test renders /speed in a real headless Chromium, served as
// package server serves it from a measured table: the screenshot must be
// the page with its chart, drawn with no external assets (the browser is
// kept off the network), and the DOM it built must hold the SVG. CI
// installs Debian's chromium; elsewhere the test skips without it. Set
// CIPHERD_SCREENSHOT_DIR to keep the screenshot.

const (
	shotWidth  = 1280
	shotHeight = 1600
)

func chromiumPath() string {
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// needChromium returns Chromium's path, or skips the test without it (and
// fails it in CI, which must install it).
func needChromium(t *testing.T) string {
	t.Helper()
	bin := chromiumPath()
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed; CI must install it (apt-get install chromium)")
		}
		t.Skip("chromium not installed")
	}
	return bin
}

// runChromium runs headless Chromium with args after the common flags and
// returns its standard output. The whole process group is killed when it
// overruns.
func runChromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	return runChromiumSize(t, bin, shotWidth, shotHeight, args...)
}

// runChromiumSize is runChromium with a window of width by height.
func runChromiumSize(t *testing.T, bin string, width, height int, args ...string) []byte {
	t.Helper()
	profile := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--hide-scrollbars", "--force-device-scale-factor=1",
		"--user-data-dir=" + profile,
		"--window-size=" + strconv.Itoa(width) + "," + strconv.Itoa(height),
	}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+profile)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("chromium %s: %s", args[0], time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, lastLines(stderr.String(), 20))
	}
	return stdout.Bytes()
}

// serve runs app on a loopback port until the test ends and returns its
// URL.
func serve(t *testing.T, app *fiber.App) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- app.Listener(ln) }()
	t.Cleanup(func() {
		if err := app.Shutdown(); err != nil {
			t.Error(err)
		}
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	url := "http://" + ln.Addr().String()
	// Serve attaches its listener asynchronously; a Shutdown before that
	// would return at once and leave Serve running.
	client := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if r, err := client.Get(url + "/speed?format=json"); err == nil {
			r.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the test server does not answer")
		}
	}
	return url
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func TestPageBrowser(t *testing.T) {
	bin := needChromium(t)
	snap := measuredSnapshot(t)
	rows := snap.Table.Result.Rows
	url := serve(t, newApp(snap)) + "/speed"

	// The DOM as the browser built it: plain /speed, negotiated to HTML by
	// the browser's own Accept header.
	dom := string(runChromium(t, bin, "--dump-dom", url))
	if !strings.Contains(dom, "<svg") || !strings.Contains(dom, "cipherd") {
		t.Fatalf("the DOM has no chart:\n%.2000s", dom)
	}
	if n := strings.Count(dom, "<polyline"); n != len(rows) {
		t.Errorf("the DOM has %d polylines, want %d", n, len(rows))
	}

	shot := filepath.Join(t.TempDir(), "speed.png")
	runChromium(t, bin, "--screenshot="+shot, url)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if dir := os.Getenv("CIPHERD_SCREENSHOT_DIR"); dir != "" {
		b, _ := os.ReadFile(shot)
		if err := os.WriteFile(filepath.Join(dir, "speed.png"), b, 0o644); err != nil {
			t.Error(err)
		}
	}
	if b := img.Bounds(); b.Dx() != shotWidth || b.Dy() != shotHeight {
		t.Fatalf("screenshot is %dx%d, want %dx%d", b.Dx(), b.Dy(), shotWidth, shotHeight)
	}

	st := pixelStats(img)
	t.Logf("screenshot: %d colours, %.1f%% not white", len(st.colours), 100*float64(st.nonWhite)/float64(shotWidth*shotHeight))
	if len(st.colours) < 50 || st.nonWhite < shotWidth*shotHeight/20 {
		t.Errorf("the screenshot looks blank: %d colours, %d pixels not white", len(st.colours), st.nonWhite)
	}
	// Every line's colour is on screen: in its legend sample and the
	// swatch of the table, at least.
	for _, row := range rows {
		hex := cipherColors[row.Cipher]
		if n := st.near(hex, 6); n < 30 {
			t.Errorf("%s/%s: only %d pixels of its colour %s", row.Name, row.Impl, n, hex)
		}
	}
}

type rgb struct{ r, g, b uint8 }

type stats struct {
	colours  map[rgb]int
	nonWhite int
}

func pixelStats(img image.Image) stats {
	st := stats{colours: map[rgb]int{}}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			c := rgb{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8)}
			st.colours[c]++
			if c != (rgb{255, 255, 255}) {
				st.nonWhite++
			}
		}
	}
	return st
}

// near counts the pixels within tol of the colour "#rrggbb" in every channel.
func (st stats) near(hex string, tol int) int {
	v, err := strconv.ParseUint(strings.TrimPrefix(hex, "#"), 16, 32)
	if err != nil {
		panic("bad colour " + hex)
	}
	want := rgb{uint8(v >> 16), uint8(v >> 8), uint8(v)}
	d := func(a, b uint8) int { return max(int(a)-int(b), int(b)-int(a)) }
	n := 0
	for c, k := range st.colours {
		if d(c.r, want.r) <= tol && d(c.g, want.g) <= tol && d(c.b, want.b) <= tol {
			n += k
		}
	}
	return n
}

// phoneWidth and phoneHeight are a phone's viewport in CSS pixels.
const (
	phoneWidth  = 390
	phoneHeight = 844
)

// screenshot takes a screenshot of url at width by height and decodes it.
func screenshot(t *testing.T, bin, url, name string, width, height int) image.Image {
	t.Helper()
	shot := filepath.Join(t.TempDir(), name)
	runChromiumSize(t, bin, width, height, "--screenshot="+shot, url)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if dir := os.Getenv("CIPHERD_SCREENSHOT_DIR"); dir != "" {
		b, _ := os.ReadFile(shot)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Error(err)
		}
	}
	if b := img.Bounds(); b.Dx() != width || b.Dy() != height {
		t.Fatalf("screenshot is %dx%d, want %dx%d", b.Dx(), b.Dy(), width, height)
	}
	return img
}

// rightMarginInk counts the pixels that are not near white in the
// rightmost columns of img: a page wider than the window runs into them
// (the screenshot cuts it there, with the scrollbars hidden), one that
// fits leaves the body's margin blank.
func rightMarginInk(img image.Image, columns int) int {
	b := img.Bounds()
	n := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Max.X - columns; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r>>8 < 235 || g>>8 < 235 || bl>>8 < 235 {
				n++
			}
		}
	}
	return n
}

// At a phone's width /speed and the fleet page fit the screen: the chart
// scales down, a wide table scrolls inside its own box, and nothing
// reaches the right margin; at a desktop's the same holds with room to
// spare.
func TestPageBrowserWidths(t *testing.T) {
	bin := needChromium(t)
	base := serve(t, newApp(measuredSnapshot(t)))
	for _, w := range []struct {
		path, name    string
		width, height int
	}{
		{"/speed", "speed-phone.png", phoneWidth, phoneHeight}, {"/speed", "speed-desktop.png", shotWidth, shotHeight},
		{"/speed/fleet", "fleet-phone.png", phoneWidth, phoneHeight}, {"/speed/fleet", "fleet-desktop.png", shotWidth, shotHeight},
	} {
		img := screenshot(t, bin, base+w.path, w.name, w.width, w.height)
		if ink := rightMarginInk(img, 8); ink > 0 {
			t.Errorf("%s at %d px: %d pixels of content in the rightmost 8 columns: the page is wider than the screen", w.path, w.width, ink)
		}
		if st := pixelStats(img); st.nonWhite < w.width*w.height/20 {
			t.Errorf("%s at %d px: the screenshot looks blank (%d pixels not white)", w.path, w.width, st.nonWhite)
		}
	}
}
