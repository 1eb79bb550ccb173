"""Deterministic test strings for tokenizer comparison.

base_strings(seed) -> list of (category, text), about 560 strings shared by every tokenizer.
special_strings(tokens, seed, name) -> list of (category, text) that write the given special /
added tokens inside text (about 40 per tokenizer).
No string contains NUL (the retain CLI and C strings cannot carry it); all are valid Unicode.
"""
import json
import random
import unicodedata
import zlib

WORDS = ("the of and to in is was for on that with as by it at from his her they be this are "
         "have not an or which one had but were all their there can been has more if will would "
         "who so no she other its may these about some what into only could new time people year "
         "language model tokenizer cache retention attention memory gradient kernel compile "
         "benchmark throughput latency vocabulary merge byte pair encoding unicode normalization "
         "Paris London Tokyo Berlin Alice Bob Mississippi antidisestablishmentarianism "
         "supercalifragilisticexpialidocious naïve café résumé coöperate façade Zürich São").split()

CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"]
CONTRACTION_BASES = ["it", "don", "they", "we", "I", "you", "she", "can", "won", "he", "isn",
                     "John", "that", "there", "who"]

EMOJI = ["😀", "😂", "🥲", "🤖", "🔥", "❤️", "❤", "👍", "👍🏽", "👍🏿", "🙏🏻", "🫠", "🪿",
         "👨‍👩‍👧‍👦", "👩‍💻", "🧑🏾‍🚀", "👁️‍🗨️", "🏳️‍🌈", "🏴‍☠️", "❤️‍🔥", "🧔‍♀️", "🫱🏼‍🫲🏿",
         "🇺🇸", "🇯🇵", "🇩🇪", "🇫🇷", "🇺🇦", "🇧🇷", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "1️⃣", "#️⃣", "*️⃣", "©️",
         "™️", "☺️", "✌🏼", "🤌", "🧠", "🐍", "🦀", "🫨", "🩷", "🫎", "🪼", "🐦‍🔥", "🍋‍🟩",
         "🙂‍↔️", "🫩", "🫟", "🪉"]

CJK = ["你好，世界！", "我们今天去公园散步。", "机器学习是人工智能的一个分支。", "中华人民共和国",
       "繁體中文測試：臺灣、香港", "𠀀𠀁𠀂 (CJK Ext B)", "一二三四五六七八九十", "龍龘齉",
       "今天天气很好，我们去吃饭吧", "上海浦东新区", "数据 123 个"]
JAPANESE = ["こんにちは世界", "東京は日本の首都です。", "カタカナとひらがなと漢字", "ｶﾀｶﾅ（半角）",
            "私はプログラマーです", "お疲れ様でした！", "ラーメンが食べたい", "〜ですね。。。",
            "日本語のテキスト、句読点。", "ゔ ゕ ゖ ㋿"]
KOREAN = ["안녕하세요 세계", "한국어 토크나이저 테스트", "서울특별시", "감사합니다!",
          "ㄱㄴㄷㄹ ㅏㅑㅓㅕ", "대한민국 만세", "위키백과, 우리 모두의 백과사전"]
ARABIC = ["مرحبا بالعالم", "اللغة العربية جميلة", "السَّلَامُ عَلَيْكُمْ", "١٢٣٤٥٦٧٨٩٠",
          "كتاب 2024 جديد", "ﷺ ﷲ", "فارسی: سلام دنیا"]
HEBREW = ["שלום עולם", "עִבְרִית עם ניקוד", "ירושלים 3000", "ה״ש ו׳"]
DEVANAGARI = ["नमस्ते दुनिया", "हिन्दी भाषा", "क्षत्रिय ज्ञान", "संस्कृतम्", "०१२३४५६७८९",
              "মাতৃভাষা বাংলা", "தமிழ் மொழி", "తెలుగు", "ಕನ್ನಡ", "ગુજરાતી", "ਪੰਜਾਬੀ"]
THAI = ["สวัสดีชาวโลก", "ภาษาไทยไม่มีการเว้นวรรค", "กรุงเทพมหานคร", "๑๒๓", "ພາສາລາວ",
        "ភាសាខ្មែរ", "မြန်မာဘာသာ"]
OTHER_SCRIPTS = ["Привет, мир! Ёжик", "Γειά σου Κόσμε ΑΒΓ αβγ ς", "Tiếng Việt có dấu: Nguyễn",
                 "Ελληνικά ΐΰ", "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３", "ǅungla ǈ ǋ ǲ",
                 "İstanbul ıi ŞşĞğ", "Straße STRASSE ß ẞ", "ꙮ ᚠᛇᚻ ᛒᛖ", "ⴰⵣⵓⵍ ⵜⵉⴼⵉⵏⴰⵖ",
                 "ሰላም ዓለም", "Հայերեն", "ქართული", "ᏣᎳᎩ", "ᠮᠣᠩᠭᠣᠯ", "བོད་ཡིག",
                 "𝐁𝐨𝐥𝐝 𝑰𝒕𝒂𝒍𝒊𝒄 𝔉𝔯𝔞𝔨", "ℌℑℜ ℂℕℙℚℝℤ"]

NFC_WORDS = ["café", "résumé", "naïve", "Ångström", "Åström", "über", "señor", "Zoë", "Crème brûlée",
             "Việt Nam", "한국", "ÉCOLE", "ǖǘǚǜ", "ḱṓṣ", "ﬁnal ﬂow", "Ⅻ ⅷ", "① ② ③", "x² y³ ½ ¾",
             "㎞ ㎏ ㍱", "ｈｅｌｌｏ", "K Å Ω", "ſ", "ﾊﾝｶｸ", "アパート", "が", "ﾞ", "\u1e9b\u0323"]

# Characters assigned in Unicode 15.0 / 15.1 / 16.0 (unassigned in Python 3.11's Unicode 14 tables).
NEW_CHARS = {
    "U+31350 CJK Ext H (15.0, Lo)": "\U00031350",
    "U+1D2C0 Kaktovik numeral zero (15.0, No)": "\U0001D2C0",
    "U+1D2C5 Kaktovik numeral five (15.0, No)": "\U0001D2C5",
    "U+10D50 Garay capital A (16.0, Lu)": "\U00010D50",
    "U+10D70 Garay small A (16.0, Ll)": "\U00010D70",
    "U+10D40 Garay digit zero (16.0, Nd)": "\U00010D40",
    "U+10D45 Garay digit five (16.0, Nd)": "\U00010D45",
    "U+16100 Gurung Khema letter (16.0, Lo)": "\U00016100",
    "U+16130 Gurung Khema digit zero (16.0, Nd)": "\U00016130",
    "U+1E4D0 Nag Mundari letter (15.0, Lo)": "\U0001E4D0",
    "U+1E4F0 Nag Mundari digit (15.0, Nd)": "\U0001E4F0",
    "U+11F04 Kawi letter (15.0, Lo)": "\U00011F04",
    "U+11F50 Kawi digit (15.0, Nd)": "\U00011F50",
    "U+11F00 Kawi sign (15.0, Mn)": "\U00011F00",
    "U+105C0 Todhri letter (16.0, Lo)": "\U000105C0",
    "U+11BC0 Sunuwar letter (16.0, Lo)": "\U00011BC0",
    "U+16D43 Kirat Rai letter (16.0, Lo)": "\U00016D43",
    "U+1E5D0 Ol Onal letter (16.0, Lo)": "\U0001E5D0",
    "U+11380 Tulu-Tigalari letter (16.0, Lo)": "\U00011380",
    "U+1CC00 Legacy computing supplement (16.0, So)": "\U0001CC00",
    "U+1FAE8 shaking face (15.0, So)": "\U0001FAE8",
    "U+1FA77 pink heart (15.0, So)": "\U0001FA77",
    "U+1FAE9 face with bags (16.0, So)": "\U0001FAE9",
    "U+0CF3 Kannada sign (15.0, Mc)": "\u0CF3",
    "U+1E030 Cyrillic modifier a (15.0, Lm)": "\U0001E030",
    "U+1DF25 Latin small letter (15.0, Ll)": "\U0001DF25",
    "U+11B00 Devanagari Ext-A head mark (15.0, Po)": "\U00011B00",
    "U+2FFC ideographic description (15.1, So)": "\u2FFC",
    "U+31EF CJK stroke (15.1, So)": "\u31EF",
    "U+2EBF0 CJK Ext I (15.1, Lo)": "\U0002EBF0",
    "U+1C89 Cyrillic capital TJE (16.0, Lu)": "\u1C89",
    "U+1C8A Cyrillic small tje (16.0, Ll)": "\u1C8A",
    "U+A7CB Latin capital ramshorn (16.0, Lu)": "\uA7CB",
}

SPACES = ["\u00a0", "\u2009", "\u3000", "\u200b", "\ufeff", "\u2028", "\u2029", "\u0085", "\x0b",
          "\x0c", "\u1680", "\u202f", "\u180e", "\x1f", "\x7f"]

CODE = [
    "def foo(x):\n    return x * 2\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
    "#include <vector>\nint main() { std::vector<int> v{1,2,3}; return v.size(); }",
    "const f = async (a, b) => { await g(a ?? b); };",
    "if __name__ == \"__main__\":\n    main()\n",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
    "    indented_with_spaces = True\n        deeper = [i for i in range(10)]",
    "\t\tdouble_tab();\n\t}\n}",
    "x=1;y=2;z=x+y//3**4%5",
    "#!/usr/bin/env bash\nset -euo pipefail\necho \"$HOME\" | grep -v '^#'",
    "fn main() -> Result<(), Box<dyn Error>> { println!(\"{:?}\", vec![1, 2]); Ok(()) }",
    "<div class=\"a\">Hello &amp; <b>world</b></div>",
    "a = {'key': [1, 2.5, None, True], \"k2\": (3,)}",
    "// comment with trailing spaces   \n/* block */",
    "lambda x: x if x else None  # noqa: E731",
    "    \n    \n\n",
    "matrix[i][j] += alpha * A[i][k] * B[k][j];",
    "git commit -m 'fix: handle \\r\\n line endings'",
    "print(f\"{value:>10.3f} | {name!r}\")",
    "std::unordered_map<std::string, std::vector<int64_t>> m;",
]

URLS = ["https://example.com/path/to/page?query=1&other=two#frag",
        "http://localhost:8080/api/v1/users/42",
        "ftp://files.example.org/pub/file-1.2.3.tar.gz",
        "mailto:alice@example.com",
        "alice.smith+tag@sub.example.co.uk",
        "https://en.wikipedia.org/wiki/Byte_pair_encoding",
        "https://例え.jp/パス?q=日本語",
        "www.google.com/search?q=tokenizer+unicode+16",
        "/usr/local/lib/python3.11/site-packages/transformers/__init__.py",
        "C:\\Users\\Admin\\Documents\\file (1).txt",
        "git@github.com:huggingface/tokenizers.git",
        "https://xn--n3h.com/ and https://☃.net/",
        "192.168.0.1:443 and [2001:db8::1]:8080",
        "s3://bucket-name/key/with/slashes/and.dots.json"]

PUNCT = ["!!!", "???", "...", "…", "?!?!?!", "---", "–—", "***", "###", "'''", "\"\"\"", "```",
         ";;;", "::", "((()))", "[[]]", "{{}}", "<<>>", "@@@", "$$$", "%%%", "^^^", "&&&", "|||",
         "~~~", "___", "+++", "===", "///", "\\\\\\", "!?", "?!", ".,;:", "«»", "„“", "‘’", "¿¡",
         "、。", "！？", "【】", "《》", "·•", "†‡", "§¶", "©®™", "°±×÷", "←→↑↓", "∀∃∈∉", "≤≥≠≈"]


def nfd(s):
    return unicodedata.normalize("NFD", s)


def base_strings(seed=1234):
    r = random.Random(seed)
    out = []

    def add(cat, s):
        assert "\x00" not in s
        out.append((cat, s))

    def sentence(n=None):
        n = n or r.randint(3, 14)
        ws = [r.choice(WORDS) for _ in range(n)]
        if r.random() < 0.6:
            ws[0] = ws[0].capitalize()
        s = " ".join(ws)
        return s + r.choice([".", "!", "?", ",", ";", "", ":", "..."])

    add("empty", "")
    # ASCII prose
    for _ in range(25):
        add("prose", " ".join(sentence() for _ in range(r.randint(1, 3))))
    for s in ["Hello", "hello", "HELLO", "Hello world", "The quick brown fox jumps over the lazy dog.",
              "I", "a", "A", "x", "Tokenization", "tokenization", "ALL CAPS SENTENCE HERE", "camelCaseIdentifier",
              "snake_case_identifier", "PascalCaseName", "kebab-case-name", "e.g. i.e. etc. Mr. Dr. U.S.A."]:
        add("prose", s)
    # whitespace
    ws_frags = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", " \n", "\n ", "\t\t", " \t ",
                "\r\n\r\n", "    ", "        ", "\n\n\n"]
    for w in ws_frags:
        add("whitespace-only", w)
    for _ in range(30):
        a, b = sentence(r.randint(1, 4)), sentence(r.randint(1, 4))
        pre = r.choice(["", "", " ", "  ", "\t", "\n", "\r\n", "   "])
        mid = r.choice(ws_frags + [" "] * 4)
        post = r.choice(["", "", " ", "  ", "\n", "\r\n", "\t", " \n"])
        add("whitespace", pre + a + mid + b + post)
    for sp in SPACES:
        add("unicode-space", f"word{sp}word")
        add("unicode-space", f"{sp}lead and trail{sp}")
    add("whitespace", " Hello")
    add("whitespace", "  Hello")
    add("whitespace", "Hello ")
    add("whitespace", "Hello  world")
    add("whitespace", "Hello\tworld")
    add("whitespace", "line1\r\nline2\r\nline3\r\n")
    add("whitespace", "a\n\n\nb")
    add("whitespace", "   leading three")
    add("whitespace", "trailing three   ")
    # digits
    for n in [0, 1, 7, 10, 42, 100, 999, 1000, 1234, 12345, 123456, 1234567, 2024, 3141592653589793]:
        add("digits", str(n))
    for _ in range(12):
        add("digits", "".join(r.choice("0123456789") for _ in range(r.randint(5, 45))))
    for s in ["1,000,000", "3.14159", "-273.15", "1e-10", "6.022e23", "0x1F3A", "0b1011", "v1.2.3",
              "2024-06-01T12:34:56Z", "+1 (555) 123-4567", "12:30pm", "50%", "$1,299.99", "€20",
              "abc123def456", "H2O CO2", "1st 2nd 3rd 4th", "10k 5M 2B", "٣٤٥ ۴۵۶ ४५६ ๔๕๖", "①②③ ⅠⅡⅢ"]:
        add("digits", s)
    # punctuation
    for p in PUNCT:
        add("punct", p)
    for _ in range(8):
        add("punct", sentence() + " " + "".join(r.choice(PUNCT) for _ in range(r.randint(1, 4))))
    # contractions
    for c in CONTRACTIONS:
        for base in r.sample(CONTRACTION_BASES, 2):
            add("contraction", f"{base}{c} here")
            add("contraction", f"{base.upper()}{c.upper()} HERE")
        add("contraction", f"X{c.upper()}")
    for s in ["I'm sure you're right, they've said we'll go and he'd know it's John's.",
              "I'M SURE YOU'RE RIGHT, THEY'VE SAID WE'LL GO AND HE'D KNOW IT'S JOHN'S.",
              "don’t won’t it’s", "rock 'n' roll", "'tis 'twas", "o'clock O'Neill", "''s", "' s",
              "students' books", "the 90's"]:
        add("contraction", s)
    # code, JSON, URLs
    for c in CODE:
        add("code", c)
    for _ in range(20):
        obj = {}
        for _ in range(r.randint(1, 5)):
            k = r.choice(WORDS)
            v = r.choice([r.randint(-10**6, 10**6), r.random(), sentence(3), None, True, [1, 2, 3],
                          {"nested": r.choice(WORDS)}, r.choice(EMOJI), r.choice(CJK)])
            obj[k] = v
        add("json", json.dumps(obj, ensure_ascii=r.random() < 0.3,
                               indent=r.choice([None, None, 2, "\t"])))
    for u in URLS:
        add("url", u)
    # emoji
    for e in EMOJI:
        add("emoji", e)
    for _ in range(12):
        add("emoji", sentence(r.randint(2, 6)) + " " + "".join(r.choice(EMOJI) for _ in range(r.randint(1, 4))))
    add("emoji", "🇺🇸🇯🇵🇩🇪")  # adjacent flags
    add("emoji", "👨‍👩‍👧‍👦👨‍👩‍👧‍👦 family x2")
    # scripts
    for s in CJK + JAPANESE + KOREAN:
        add("cjk", s)
    for s in ARABIC + HEBREW:
        add("rtl", s)
    for s in DEVANAGARI + THAI:
        add("indic-se-asian", s)
    for s in OTHER_SCRIPTS:
        add("other-script", s)
    for _ in range(15):
        pool = CJK + JAPANESE + KOREAN + ARABIC + HEBREW + DEVANAGARI + THAI + OTHER_SCRIPTS
        add("mixed-script", f"{r.choice(pool)} {sentence(3)} {r.choice(pool)}")
    # combining marks and normalization forms
    for w in NFC_WORDS:
        nf = unicodedata.normalize("NFC", w)
        add("nfc", nf)
        if nfd(nf) != nf:
            add("nfd", nfd(nf))
        kc = unicodedata.normalize("NFKC", w)
        if kc != nf:
            add("nfkc", kc)
    for s in ["e\u0301", "a\u0300\u0301\u0302\u0303", "Z\u0335\u0321\u0330a\u0336\u0317l\u0334g\u0338o",
              "\u0301 leading combining", "q\u0307\u0323", "ñ vs n\u0303", "Å vs Å vs A\u030a",
              "\u1100\u1161\u11a8 (conjoining jamo)", "ก\u0e31\u0e49", "क\u094d\u200dष", "a\u200db\u200cc",
              "\u0345\u0345", "x\u20dd", "ä\u0308"]:
        add("combining", s)
    # Unicode 15/16
    for name, ch in NEW_CHARS.items():
        add("unicode15-16", ch)
        add("unicode15-16", f"abc{ch}def")
        if "16.0" in name or "Lu" in name or "Ll" in name or "Nd" in name:
            add("unicode15-16", f" {ch}{ch}{ch} ")
    for _ in range(12):
        chars = r.sample(list(NEW_CHARS.values()), 4)
        add("unicode15-16", f"{sentence(2)} {''.join(chars)} {r.choice(WORDS)}{chars[0]}1")
    g_upper, g_lower = "\U00010D50", "\U00010D70"
    add("unicode15-16", f"{g_upper}{g_lower}{g_lower} {g_upper}{g_upper} x{g_lower}")
    add("unicode15-16", "\U00010D40\U00010D41\U00010D42 123 \U0001D2C1\U0001D2C2")
    add("unicode15-16", "it\U00010D70s it's \U00010D50'S")
    add("unicode15-16", "\u1C89\u1C8A \uA7CB\uA7CC \U00031350\U00031351")
    # control-ish
    for s in ["bell\x07char", "esc\x1b[31mred\x1b[0m", "tab\x09vt\x0bff\x0c", "del\x7fx", "\x01\x02\x03",
              "soft\u00adhyphen", "rtl\u202emark\u202c", "zw\u200bsp", "bom\ufeffmid", "\ufeffbom lead",
              "private\ue000use", "nonchar\ufffe\uffff", "replacement \ufffd char", "max \U0010fffd"]:
        add("control", s)
    # long
    add("long", " ".join(sentence() for _ in range(60)))
    add("long", "a" * 1000)
    add("long", " " * 300 + "x")
    add("long", "\n" * 100)
    add("long", "9" * 500)
    add("long", "🙂" * 200)
    add("long", "ab " * 400)
    add("long", "".join(r.choice(CJK + JAPANESE) for _ in range(40)))
    # random mixes of everything
    frags = (WORDS + EMOJI + CJK + JAPANESE + KOREAN + ARABIC + HEBREW + DEVANAGARI + THAI +
             OTHER_SCRIPTS + NFC_WORDS + list(NEW_CHARS.values()) + PUNCT + SPACES + URLS[:5] +
             ["'s", "'LL", "123", "4567", " ", "  ", "\n", "\t", "\r\n"])
    for _ in range(35):
        add("random-mix", "".join(r.choice(frags) + r.choice(["", " ", "", "  ", "\n"])
                                  for _ in range(r.randint(2, 12))))
    seen, uniq = set(), []
    for c, t in out:
        if t not in seen:
            seen.add(t)
            uniq.append((c, t))
    return uniq


def special_strings(tokens, name, seed=1234):
    """tokens: list of token contents (special first). Strings embedding them in text."""
    r = random.Random(seed ^ zlib.crc32(name.encode()))
    out = []
    tokens = [t for t in tokens if t and "\x00" not in t]
    if not tokens:
        return out
    for t in tokens[:14]:
        for tpl in ["{t}", "Hello {t} world", "{t}{t}", " {t} ", "x{t}y", "{t}\ntext", "text\n{t}",
                    "  {t}", "{t}  "]:
            out.append(("special-token", tpl.format(t=t)))
    for _ in range(12):
        a, b = r.choice(tokens), r.choice(tokens)
        out.append(("special-token", f"{r.choice(WORDS)} {a}{r.choice(['', ' ', chr(10)])}{b} {r.choice(WORDS)}"))
    for t in tokens[:6]:
        if len(t) > 2:
            out.append(("special-token-near", t[:-1]))
            out.append(("special-token-near", t.lower() if t.lower() != t else t.upper()))
            out.append(("special-token-near", t[0] + " " + t[1:]))
    return out
