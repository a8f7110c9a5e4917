package content

import (
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
)

// cjkCandidate is an East Asian encoding sniffCJK tries.
type cjkCandidate struct {
	name string // WHATWG name
	enc  encoding.Encoding
}

// cjkCandidates are tried in this order; on equal scores the first wins.
var cjkCandidates = [...]cjkCandidate{
	{"gbk", simplifiedchinese.GB18030},
	{"big5", traditionalchinese.Big5},
	{"shift_jis", japanese.ShiftJIS},
	{"euc-jp", japanese.EUCJP},
	{"euc-kr", korean.EUCKR},
}

// sniffCJK returns the East Asian encoding p (non-ASCII, not UTF-8) is most
// likely in, or "" when none is likely. Each candidate decodes p; one that
// yields invalid sequences (U+FFFD before the last rune, which the prefix may
// have cut) or private-use characters is out. The others are scored by how
// many of the letters they yield are among the most frequent characters of
// Chinese (simplified and traditional), Japanese (with every kana) and
// Korean: a wrong decoding yields mostly rare characters. The best one is
// kept when at least a quarter of its letters, and at least two, are
// frequent; otherwise the text is more likely in a single-byte encoding.
func sniffCJK(p []byte) string {
	freq := frequentRunes()
	best, bestHits := "", 0
	for _, c := range cjkCandidates {
		out, err := c.enc.NewDecoder().Bytes(p)
		if err != nil {
			continue
		}
		hits, letters, ok := 0, 0, true
		for i := 0; i < len(out); {
			r, n := utf8.DecodeRune(out[i:])
			i += n
			switch {
			case r < utf8.RuneSelf:
			case r == utf8.RuneError && i < len(out), r >= 0xe000 && r <= 0xf8ff:
				ok = false
			case unicode.IsLetter(r):
				letters++
				if _, f := freq[r]; f {
					hits++
				}
			}
			if !ok {
				break
			}
		}
		if ok && hits >= 2 && 4*hits >= letters && hits > bestHits {
			best, bestHits = c.name, hits
		}
	}
	return best
}

// frequentRunes is the set of frequent CJK characters sniffCJK counts; built
// once, never modified.
var frequentRunes = sync.OnceValue(func() map[rune]struct{} {
	m := make(map[rune]struct{}, 2048)
	for _, s := range []string{frequentHans, frequentHant, frequentJa, frequentKo} {
		for _, r := range s {
			m[r] = struct{}{}
		}
	}
	for r := rune(0x3041); r <= 0x30fa; r++ { // hiragana and katakana
		m[r] = struct{}{}
	}
	return m
})

// Frequent characters, after the usual frequency lists of each language
// (a few hundred each; they cover well over half of running text).
const (
	frequentHans = "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯专石若兵弟谁校读志飞观争究包组造落视济喜离虽坐集编宝谈府拉黑且随格尽剑讲布杀微怕母调局根曾准团段终乐切级克精哪官示冷域价费存类易惊响奖搜索购商品新闻登录注册帐号首页关于我们联系邮箱中国北京上海"
	frequentHant = "這來國個說們為時過學對裡後麼發當無開見經頭從動兩長樣現將與點實種聲話兒問機給幾業間電門東聽氣關並內軍產萬體別處總場師書員華報馬張難數車應覺觀爭組視濟離雖編寶談劍講殺調準團終樂級請愛讓認論義術結條變聯權該領傳紅決達辦運強區轉眾輕語滿寫識極黃臉錢黨歷廣議際則單據導網專讀飛稱醫類驚響獎購閱錄註冊帳號頁於係聯繫郵箱臺灣香港"
	frequentJa   = "日本人大中国会社時間見来行出入事業者新聞記情報検索楽天株式内外品商通販送料無方法問題利用規約表示選択全部最近一覧詳細登録変更確認場合他性的学生員画像動写真映音番組地域住所電話号円込様気駅語読書売買続説関開東京都府県市区町村年月週分今私僕彼思言上下前後手物自分何度作使持知意味仕探違高安多少長良悪新古"
	frequentKo   = "이의다는에을하고를기가서지사한로으나도자리어대수아니해정인일시있보적여스부주전게것들라구과제상우면경만성동국내거소장조관때화러비신원세그문생데마히중되할했등연요모유미위무방오개계터안공식학없말각후월년분실회행야까바저습드려르같결작발선통감명물단법영금업양간현치노트입당민체품더및또용점진차합초날함받많될었였았겠에서하는합니다입니다"
)
