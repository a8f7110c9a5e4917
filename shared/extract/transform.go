package extract

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// numberRE finds a number in free text: thousands separated by commas
// ("1,299.00") or plain digits, with an optional fraction and sign.
var numberRE = regexp.MustCompile(`[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+`)

// apply runs one transform (not join) on one value.
func (t compiledTransform) apply(v any, base *url.URL) (any, error) {
	switch t.Op {
	case OpTrim:
		return strings.TrimSpace(toString(v)), nil
	case OpLower:
		return strings.ToLower(toString(v)), nil
	case OpUpper:
		return strings.ToUpper(toString(v)), nil
	case OpCollapseSpace:
		return strings.Join(strings.Fields(toString(v)), " "), nil
	case OpReplace:
		return t.re.ReplaceAllString(toString(v), t.With), nil
	case OpAbsoluteURL:
		u, err := resolve(base, toString(v))
		if err != nil {
			return nil, fmt.Errorf("transform absolute_url: %w", err)
		}
		return u, nil
	case OpNumber:
		f, err := numberOf(v)
		if err != nil {
			return nil, fmt.Errorf("transform number: %w", err)
		}
		return f, nil
	case OpInteger:
		f, err := numberOf(v)
		if err != nil {
			return nil, fmt.Errorf("transform integer: %w", err)
		}
		i, err := integral(f)
		if err != nil {
			return nil, fmt.Errorf("transform integer: %w", err)
		}
		return i, nil
	}
	return v, nil
}

// numberOf returns the value as a number; text yields its first number.
func numberOf(v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case int64:
		return float64(x), nil
	case json.Number:
		return x.Float64()
	}
	s := toString(v)
	m := numberRE.FindStringIndex(s)
	if m == nil {
		return 0, fmt.Errorf("no number in %q", clip(s))
	}
	num := s[m[0]:m[1]]
	if m[0] > 0 && (num[0] == '-' || num[0] == '+') {
		// "X-100" is a model name, not minus 100.
		if r, _ := utf8.DecodeLastRuneInString(s[:m[0]]); unicode.IsLetter(r) || unicode.IsDigit(r) {
			num = num[1:]
		}
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(num, ",", ""), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, fmt.Errorf("number %q out of range", num)
	}
	return f, nil
}

// integral returns f as an int64 when it is a whole number in range.
func integral(f float64) (int64, error) {
	if f != math.Trunc(f) || math.IsNaN(f) || f < -(1<<63) || f >= 1<<63 {
		return 0, fmt.Errorf("%v is not an integer", f)
	}
	return int64(f), nil
}

// convert gives a value its field type.
func convert(v any, typ string, base *url.URL) (any, error) {
	switch typ {
	case "", TypeString:
		return toString(v), nil
	case TypeNumber:
		switch x := v.(type) {
		case float64:
			return x, nil
		case int64:
			return float64(x), nil
		case json.Number:
			f, err := x.Float64()
			if err != nil {
				return nil, fmt.Errorf("type number: %w", err)
			}
			return f, nil
		case string:
			f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, fmt.Errorf("type number: %q is not a number", clip(x))
			}
			return f, nil
		}
		return nil, fmt.Errorf("type number: got %s", kind(v))
	case TypeInteger:
		switch x := v.(type) {
		case int64:
			return x, nil
		case float64:
			i, err := integral(x)
			if err != nil {
				return nil, fmt.Errorf("type integer: %w", err)
			}
			return i, nil
		case json.Number, string:
			s := strings.TrimSpace(toString(x))
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				return i, nil
			}
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, fmt.Errorf("type integer: %q is not an integer", clip(s))
			}
			i, err := integral(f)
			if err != nil {
				return nil, fmt.Errorf("type integer: %w", err)
			}
			return i, nil
		}
		return nil, fmt.Errorf("type integer: got %s", kind(v))
	case TypeBoolean:
		switch x := v.(type) {
		case bool:
			return x, nil
		case string:
			switch strings.ToLower(strings.TrimSpace(x)) {
			case "true", "yes", "on", "1":
				return true, nil
			case "false", "no", "off", "0":
				return false, nil
			}
			return nil, fmt.Errorf("type boolean: %q is not a boolean", clip(x))
		}
		return nil, fmt.Errorf("type boolean: got %s", kind(v))
	case TypeURL:
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("type url: got %s", kind(v))
		}
		u, err := resolve(base, s)
		if err != nil {
			return nil, fmt.Errorf("type url: %w", err)
		}
		return u, nil
	}
	return nil, fmt.Errorf("unknown type %q", typ)
}

// resolve makes ref absolute against base; the result must be an
// http(s) URL with a host.
func resolve(base *url.URL, ref string) (string, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return "", errors.New("empty url")
	}
	r, err := url.Parse(ref)
	if err != nil {
		return "", fmt.Errorf("parse url %q: %w", clip(ref), err)
	}
	if base != nil {
		r = base.ResolveReference(r)
	}
	if (r.Scheme != "http" && r.Scheme != "https") || r.Host == "" {
		return "", fmt.Errorf("%q is not an absolute http(s) url", clip(ref))
	}
	return r.String(), nil
}

// toString renders any extracted value as text.
func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case int64:
		return strconv.FormatInt(x, 10)
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func kind(v any) string {
	switch v.(type) {
	case bool:
		return "a boolean"
	case *jsonObject:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}

// clip shortens a value quoted in an error.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:61] + "..."
}
