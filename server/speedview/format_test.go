package speedview

import (
	"errors"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
)

func TestNegotiate(t *testing.T) {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/speed", func(c *fiber.Ctx) error {
		format, err := Negotiate(c)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Errorf("Negotiate: %v, want ErrFormat", err)
			}
			return c.Status(fiber.StatusBadRequest).SendString(err.Error())
		}
		return c.SendString(format)
	})
	for _, tc := range []struct {
		query, accept, want string
	}{
		{"", "", FormatJSON},
		{"", "*/*", FormatJSON},
		{"", "application/json", FormatJSON},
		{"", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", FormatHTML},
		{"", "application/json;q=0.5, text/html", FormatHTML},
		{"", "text/html;q=0.1, application/json", FormatJSON},
		{"?format=", "text/html", FormatHTML},
		{"?format=json", "text/html", FormatJSON},
		{"?format=html", "application/json", FormatHTML},
		{"?format=text", "text/html", FormatText},
		{"?format=mr", "", FormatMR},
	} {
		code, body, hdr := get(t, app, "/speed"+tc.query, tc.accept)
		if code != 200 || string(body) != tc.want {
			t.Errorf("GET /speed%s Accept %q: %d %q, want %s", tc.query, tc.accept, code, body, tc.want)
		}
		if !strings.Contains(hdr.Get("Vary"), "Accept") {
			t.Errorf("GET /speed%s: Vary %q", tc.query, hdr.Get("Vary"))
		}
	}
	for _, f := range []string{"xml", "JSON", "htm"} {
		code, body, hdr := get(t, app, "/speed?format="+f, "text/html")
		if code != 400 || string(body) != ErrFormat.Error() || !strings.Contains(hdr.Get("Vary"), "Accept") {
			t.Errorf("?format=%s: %d %q, Vary %q", f, code, body, hdr.Get("Vary"))
		}
	}
}
