package speedview

import (
	"errors"

	"github.com/gofiber/fiber/v2"
)

// Response formats of GET /speed, as ?format= names them: the JSON
// [Report], openssl's text table, its -mr lines, and the page.
const (
	FormatJSON = "json"
	FormatText = "text"
	FormatMR   = "mr"
	FormatHTML = "html"
)

// ErrFormat is Negotiate's error for a ?format= it does not know.
var ErrFormat = errors.New("format must be json, text, mr or html")

// Negotiate picks the response format of c: ?format= wins; otherwise a
// client that prefers HTML (a browser) gets the page and everyone else
// JSON. It marks the response as varying with Accept, and fails with
// ErrFormat, and no other error, for an unknown ?format=.
func Negotiate(c *fiber.Ctx) (string, error) {
	c.Vary(fiber.HeaderAccept)
	switch f := c.Query("format"); f {
	case FormatJSON, FormatText, FormatMR, FormatHTML:
		return f, nil
	case "":
	default:
		return "", ErrFormat
	}
	if c.Accepts(fiber.MIMEApplicationJSON, fiber.MIMETextHTML) == fiber.MIMETextHTML {
		return FormatHTML, nil
	}
	return FormatJSON, nil
}
