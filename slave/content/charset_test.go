package content

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
	"golang.org/x/text/encoding/unicode"
)

// decodeAll reads body p (kept in memory, or spilled when memLimit is
// small) through DecodeHTML.
func decodeAll(t *testing.T, p []byte, contentType string, memLimit int) (string, Encoding) {
	t.Helper()
	b, err := ReadBody(bytes.NewReader(p), BodyOptions{MemLimit: memLimit, TempDir: t.TempDir()})
	if err != nil {
		t.Fatalf("ReadBody: %v", err)
	}
	defer b.Close()
	r, enc, err := DecodeHTML(b, contentType)
	if err != nil {
		t.Fatalf("DecodeHTML: %v", err)
	}
	// the decision without the decoder is the same
	if got := DetectBody(b, contentType); got != enc {
		t.Errorf("DetectBody = %+v, DecodeHTML decided %+v", got, enc)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read decoded: %v", err)
	}
	return string(out), enc
}

// firstHref is the href of the first <a> of doc.
func firstHref(doc string) string {
	z := html.NewTokenizer(strings.NewReader(doc))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return ""
		case html.StartTagToken:
			if name, more := z.TagName(); string(name) == "a" {
				for more {
					var k, v []byte
					k, v, more = z.TagAttr()
					if string(k) == "href" {
						return string(v)
					}
				}
			}
		}
	}
}

func TestDecodeHTMLEastAsian(t *testing.T) {
	fixtures := []struct {
		file     string
		enc      encoding.Encoding
		label    string // the label declared
		name     string // the WHATWG name of the encoding chosen
		wantHref string
	}{
		{"zh-hans.html", simplifiedchinese.GBK, "gbk", "gbk", "/新闻/北京?q=中文"},
		{"zh-hans.html", simplifiedchinese.GBK, "gb2312", "gbk", "/新闻/北京?q=中文"},
		{"zh-hans.html", simplifiedchinese.GB18030, "gb18030", "gb18030", "/新闻/北京?q=中文"},
		{"zh-gb18030.html", simplifiedchinese.GB18030, "gb18030", "gb18030", "/新闻/𠀀?q=中文"},
		// Four-byte sequences in a page labelled gb2312: decoded as
		// browsers do, with the GB18030 decoder.
		{"zh-gb18030.html", simplifiedchinese.GB18030, "gb2312", "gbk", "/新闻/𠀀?q=中文"},
		{"zh-hant.html", traditionalchinese.Big5, "big5", "big5", "/新聞/臺北?q=中文"},
		{"ja.html", japanese.ShiftJIS, "shift_jis", "shift_jis", "/ニュース/東京?q=日本語"},
		{"ja.html", japanese.ShiftJIS, "x-sjis", "shift_jis", "/ニュース/東京?q=日本語"},
		{"ja.html", japanese.EUCJP, "euc-jp", "euc-jp", "/ニュース/東京?q=日本語"},
		{"ko.html", korean.EUCKR, "euc-kr", "euc-kr", "/뉴스/서울?q=한국어"},
		{"ko.html", korean.EUCKR, "ks_c_5601-1987", "euc-kr", "/뉴스/서울?q=한국어"},
	}
	type declaration struct {
		name        string
		meta        string
		contentType string
		source      string
	}
	for _, fx := range fixtures {
		tmpl, err := os.ReadFile(filepath.Join("testdata", "charset", fx.file))
		if err != nil {
			t.Fatalf("read fixture: %v", err)
		}
		// An undeclared GB18030 page is sniffed as GBK, which is decoded
		// with the GB18030 decoder: the text comes out right.
		sniffed := fx.name
		if sniffed == "gb18030" {
			sniffed = "gbk"
		}
		decls := []declaration{
			{"header", "", "text/html; charset=" + fx.label, SourceHeader},
			{"header+wrong meta", `<meta charset="iso-8859-1">`, "text/html; charset=\"" + strings.ToUpper(fx.label) + "\"", SourceHeader},
			{"meta charset", `<meta charset="` + fx.label + `">`, "text/html", SourceMeta},
			{"meta http-equiv", `<meta http-equiv="Content-Type" content="text/html; charset=` + fx.label + `">`, "", SourceMeta},
			{"undeclared", "", "text/html", SourceSniff},
		}
		for _, d := range decls {
			want := strings.Replace(string(tmpl), "<!--META-->", d.meta, 1)
			encoded, err := fx.enc.NewEncoder().Bytes([]byte(want))
			if err != nil {
				t.Fatalf("%s as %s: encode fixture: %v", fx.file, fx.label, err)
			}
			wantEnc := Encoding{Name: fx.name, Source: d.source}
			if d.source == SourceSniff {
				wantEnc.Name = sniffed
			}
			for _, memLimit := range []int{0, 256} { // in memory, spilled
				got, enc := decodeAll(t, encoded, d.contentType, memLimit)
				if diff := cmp.Diff(wantEnc, enc); diff != "" {
					t.Errorf("%s as %s, %s, memLimit %d: encoding (-want +got):\n%s", fx.file, fx.label, d.name, memLimit, diff)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s as %s, %s, memLimit %d: text (-want +got):\n%s", fx.file, fx.label, d.name, memLimit, diff)
				}
				if href := firstHref(got); href != fx.wantHref {
					t.Errorf("%s as %s, %s, memLimit %d: href %q, want %q", fx.file, fx.label, d.name, memLimit, href, fx.wantHref)
				}
			}
		}
	}
}

func TestDetectHTML(t *testing.T) {
	latin := "<html><body><p>Le café de la gare propose un menu à prix réduit, une crème brûlée et un gâteau façon grand-mère. Voilà, c'est décidé : on déjeune là-bas à midi.</p></body></html>"
	latin1, err := encodingBytes(latin, charmap.Windows1252)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		doc         string
		contentType string
		want        Encoding
	}{
		{"empty", "", "", Encoding{"windows-1252", SourceDefault}},
		{"ascii", "<p>hello</p>", "text/html", Encoding{"windows-1252", SourceDefault}},
		{"utf-8 sniffed", "<p>héllo wörld</p>", "", Encoding{"utf-8", SourceSniff}},
		{"utf-8 cut at the end", "<p>héllo</p>" + string([]byte("€")[:2]), "", Encoding{"utf-8", SourceSniff}},
		{"latin-1 text is not CJK", string(latin1), "", Encoding{"windows-1252", SourceDefault}},
		{"header", "<p>x</p>", "text/html; charset=GB2312", Encoding{"gbk", SourceHeader}},
		{"header quoted", "<p>x</p>", `text/html; charset="Shift_JIS"`, Encoding{"shift_jis", SourceHeader}},
		{"header malformed", "<p>x</p>", "text/html; charset=euc-kr;;", Encoding{"euc-kr", SourceHeader}},
		{"header no space", "<p>x</p>", "text/html;charset=big5", Encoding{"big5", SourceHeader}},
		{"header unknown charset", `<meta charset="big5">`, "text/html; charset=none", Encoding{"big5", SourceMeta}},
		{"header over meta", `<meta charset="big5">`, "text/html; charset=utf-8", Encoding{"utf-8", SourceHeader}},
		{"header latin1 is windows-1252", "<p>x</p>", "text/html; charset=iso-8859-1", Encoding{"windows-1252", SourceHeader}},
		{"bom over header", "\xef\xbb\xbf<p>x</p>", "text/html; charset=gbk", Encoding{"utf-8", SourceBOM}},
		{"utf-16le bom", "\xff\xfe<\x00p\x00>\x00", "", Encoding{"utf-16le", SourceBOM}},
		{"utf-16be bom", "\xfe\xff\x00<\x00p\x00>", "", Encoding{"utf-16be", SourceBOM}},
		{"meta charset", `<meta charset="euc-jp">`, "", Encoding{"euc-jp", SourceMeta}},
		{"meta http-equiv", `<meta http-equiv="content-type" content="text/html; charset=gb2312">`, "", Encoding{"gbk", SourceMeta}},
		{"meta content without pragma", `<meta content="text/html; charset=gb2312">`, "", Encoding{"windows-1252", SourceDefault}},
		{"meta utf-16 means utf-8", `<meta charset="utf-16le">`, "", Encoding{"utf-8", SourceMeta}},
		{"meta x-user-defined means windows-1252", `<meta charset="x-user-defined">`, "", Encoding{"windows-1252", SourceMeta}},
		{"meta past 1024 bytes", strings.Repeat(" ", 1024) + `<meta charset="big5">`, "", Encoding{"big5", SourceMeta}},
		{"meta after body text", `<p>hello</p><meta charset="big5">`, "", Encoding{"big5", SourceMeta}},
		{"meta windows-1252 over utf-8 sniffing", `<meta charset="windows-1252"><p>héllo</p>`, "", Encoding{"windows-1252", SourceMeta}},
	}
	for _, tt := range tests {
		name, source := DetectHTML([]byte(tt.doc), tt.contentType)
		if diff := cmp.Diff(tt.want, Encoding{name, source}); diff != "" {
			t.Errorf("%s: (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestDecodeHTMLBOMAndInvalid(t *testing.T) {
	utf16, err := encodingBytes("<p>中文</p>", unicode.UTF16(unicode.LittleEndian, unicode.UseBOM))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		doc     []byte
		want    string
		wantEnc Encoding
	}{
		{"utf-8 bom stripped", []byte("\xef\xbb\xbf<p>中文</p>"), "<p>中文</p>", Encoding{"utf-8", SourceBOM}},
		{"utf-16le bom", utf16, "<p>中文</p>", Encoding{"utf-16le", SourceBOM}},
		{"invalid utf-8 replaced", []byte("<meta charset=utf-8><p>a\xffb</p>"), "<meta charset=utf-8><p>a\ufffdb</p>", Encoding{"utf-8", SourceMeta}},
		{"windows-1252", []byte("<p>caf\xe9 \x80</p>"), "<p>café €</p>", Encoding{"windows-1252", SourceDefault}},
		{"meta past SniffLen", []byte(strings.Repeat(" ", SniffLen) + `<meta charset="big5">`), strings.Repeat(" ", SniffLen) + `<meta charset="big5">`, Encoding{"windows-1252", SourceDefault}},
	}
	for _, tt := range tests {
		got, enc := decodeAll(t, tt.doc, "", 0)
		if diff := cmp.Diff(tt.wantEnc, enc); diff != "" {
			t.Errorf("%s: encoding (-want +got):\n%s", tt.name, diff)
		}
		if got != tt.want {
			t.Errorf("%s: decoded %q, want %q", tt.name, got, tt.want)
		}
	}
	if got := DetectBody(nil, ""); got != (Encoding{}) {
		t.Errorf("DetectBody(nil) = %+v, want none", got)
	}
	if _, _, err := DecodeHTML(nil, ""); err == nil {
		t.Errorf("DecodeHTML(nil) succeeded")
	}
}

func encodingBytes(s string, e encoding.Encoding) ([]byte, error) {
	return e.NewEncoder().Bytes([]byte(s))
}

// TestSniffCJK checks the sniffing step on short undeclared texts that are
// not in the fixtures (nor chosen for the frequency lists), and that
// European text in windows-1252 is not taken for an East Asian encoding.
func TestSniffCJK(t *testing.T) {
	tests := []struct {
		text string
		enc  encoding.Encoding
		want string
	}{
		{"人工智能技术正在改变世界各地的生活方式，越来越多的企业开始使用机器学习来提高效率。", simplifiedchinese.GBK, "gbk"},
		{"人工智慧技術正在改變世界各地的生活方式，越來越多的企業開始使用機器學習來提高效率。", traditionalchinese.Big5, "big5"},
		{"私たちは毎朝コーヒーを飲みながら新聞を読みます。週末には家族と公園へ散歩に行きます。", japanese.ShiftJIS, "shift_jis"},
		{"私たちは毎朝コーヒーを飲みながら新聞を読みます。週末には家族と公園へ散歩に行きます。", japanese.EUCJP, "euc-jp"},
		{"우리는 매일 아침 커피를 마시면서 신문을 읽습니다. 주말에는 가족과 함께 공원에 산책을 갑니다.", korean.EUCKR, "euc-kr"},
		{"Größere Änderungen: Müller übernimmt die Führung, Straßenbahn fährt öfter.", charmap.Windows1252, ""},
		{"Señor Muñoz, ¿qué opinión tiene sobre la situación económica? Está mejorando.", charmap.Windows1252, ""},
		{"Le café de la gare propose un menu à prix réduit, une crème brûlée et un gâteau.", charmap.Windows1252, ""},
	}
	for _, tt := range tests {
		p, err := encodingBytes("<html><body><p>"+tt.text+"</p></body></html>", tt.enc)
		if err != nil {
			t.Fatalf("encode %q: %v", tt.text, err)
		}
		if got := sniff(p); got != tt.want {
			t.Errorf("sniff(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}
