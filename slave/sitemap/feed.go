package sitemap

import (
	"strconv"
	"strings"
	"time"
)

// parsePubDate parses an RSS date: RFC 822 as RSS 2.0 specifies it, with
// the liberties feeds take ("Sun, 06 Sep 2009 16:20:00 +0000", the day of
// the week left out or wrong, a two-digit year, no seconds, a zone name
// such as GMT or EST), else a W3C datetime (some feeds write one); the
// zero time when it is neither, or has no zone.
func parsePubDate(s string) time.Time {
	s = strings.TrimSpace(s)
	rest := s
	if i := strings.IndexByte(rest, ','); i >= 0 {
		rest = rest[i+1:] // the day of the week is not checked
	}
	f := strings.Fields(rest)
	if len(f) != 5 {
		return ParseLastMod(s)
	}
	day, month, year, clock, zone := f[0], f[1], f[2], f[3], f[4]
	switch len(year) {
	case 2: // RFC 2822: 00-49 are 20xx, 50-99 19xx
		n, err := strconv.Atoi(year)
		if err != nil {
			return time.Time{}
		}
		if n < 50 {
			n += 2000
		} else {
			n += 1900
		}
		year = strconv.Itoa(n)
	case 4:
	default:
		return time.Time{}
	}
	if strings.Count(clock, ":") == 1 {
		clock += ":00"
	}
	offset, ok := zoneOffset(zone)
	if !ok {
		return time.Time{}
	}
	t, err := time.Parse("2 Jan 2006 15:04:05", day+" "+month+" "+year+" "+clock)
	if err != nil {
		return time.Time{}
	}
	return t.Add(-time.Duration(offset) * time.Second).UTC()
}

// zoneOffset returns the offset east of UTC, in seconds, of an RFC 822
// zone: +hhmm or -hhmm, or one of its names (military letters aside).
func zoneOffset(z string) (int, bool) {
	if len(z) == 5 && (z[0] == '+' || z[0] == '-') {
		hh, err1 := strconv.Atoi(z[1:3])
		mm, err2 := strconv.Atoi(z[3:5])
		if err1 != nil || err2 != nil || hh > 23 || mm > 59 || z[1] == '+' || z[1] == '-' {
			return 0, false
		}
		off := hh*3600 + mm*60
		if z[0] == '-' {
			off = -off
		}
		return off, true
	}
	switch strings.ToUpper(z) {
	case "UT", "UTC", "GMT", "Z":
		return 0, true
	case "EDT":
		return -4 * 3600, true
	case "EST", "CDT":
		return -5 * 3600, true
	case "CST", "MDT":
		return -6 * 3600, true
	case "MST", "PDT":
		return -7 * 3600, true
	case "PST":
		return -8 * 3600, true
	}
	return 0, false
}
