#include "data/ruler_words.h"

namespace retain {

const std::vector<std::string>& ruler_adjectives() {
  static const std::vector<std::string> words = {
      "able", "active", "afraid", "agile", "alert", "ancient", "angry", "anxious", "awake",
      "aware", "bald", "bare", "basic", "bitter", "blank", "bold", "brave", "brief", "bright",
      "broad", "broken", "busy", "calm", "careful", "cheap", "chief", "civil", "clean", "clear",
      "clever", "close", "cold", "common", "cool", "crazy", "crisp", "cruel", "curious", "damp",
      "dark", "dear", "deep", "dense", "dizzy", "dry", "dull", "eager", "early", "eastern",
      "easy", "elegant", "empty", "equal", "exact", "faint", "fair", "false", "famous", "fancy",
      "fast", "fierce", "final", "firm", "flat", "fond", "formal", "fresh", "friendly", "frozen",
      "funny", "gentle", "giant", "glad", "golden", "grand", "grateful", "great", "green", "grim",
      "gross", "happy", "hard", "harsh", "heavy", "hidden", "high", "hollow", "honest", "huge",
      "humble", "hungry", "icy", "idle", "innocent", "jolly", "keen", "kind", "large", "late",
      "lazy", "light", "little", "lively", "lonely", "long", "loose", "loud", "loyal", "lucky",
      "mad", "major", "massive", "mellow", "mild", "minor", "modest", "moist", "narrow", "neat",
      "nervous", "new", "noble", "noisy", "normal", "odd", "old", "open", "orange", "patient",
      "plain", "pleasant", "polite", "poor", "proud", "pure", "purple", "quick", "quiet", "rapid",
      "rare", "raw", "ready", "real", "rich", "rigid", "ripe", "rough", "round", "royal", "rude",
      "rural", "rusty", "sad", "safe", "salty", "sharp", "shiny", "short", "shy", "silent",
      "silly", "simple", "sleepy", "slim", "slow", "small", "smart", "smooth", "soft", "solid",
      "sour", "spare", "steady", "steep", "stiff", "still", "strange", "strict", "strong",
      "sturdy", "sudden", "sunny", "super", "sweet", "swift", "tall", "tame", "tender", "thick",
      "thin", "tidy", "tiny", "tough", "tricky", "urban", "useful", "vague", "vast", "vivid",
      "warm", "weak", "wealthy", "weary", "wet", "whole", "wide", "wild", "wise", "witty",
      "young",
  };
  return words;
}

const std::vector<std::string>& ruler_nouns() {
  static const std::vector<std::string> words = {
      "acorn", "actor", "airport", "album", "anchor", "angle", "animal", "ankle", "answer",
      "apple", "apron", "arch", "arena", "arm", "army", "arrow", "artist", "attic", "author",
      "autumn", "badge", "bag", "baker", "balcony", "ball", "banana", "band", "bank", "barn",
      "basket", "bath", "beach", "bean", "bear", "bed", "bee", "bell", "belt", "bench", "berry",
      "bicycle", "bird", "blanket", "boat", "body", "bone", "book", "boot", "bottle", "box",
      "branch", "bread", "brick", "bridge", "brother", "brush", "bucket", "building", "bus",
      "butter", "button", "cabin", "cactus", "cake", "camera", "camp", "candle", "canyon",
      "captain", "car", "card", "carpet", "castle", "cat", "cave", "ceiling", "chair", "chalk",
      "cheese", "cherry", "chicken", "child", "chimney", "church", "circle", "city", "cliff",
      "clock", "cloud", "coach", "coast", "coat", "coffee", "coin", "comet", "compass", "cookie",
      "corner", "cotton", "country", "cousin", "cow", "crab", "crayon", "crown", "cup", "curtain",
      "cushion", "daisy", "dancer", "desert", "desk", "diamond", "dinner", "doctor", "dog",
      "doll", "dolphin", "door", "dragon", "drawer", "dream", "drum", "duck", "eagle", "earth",
      "egg", "elbow", "engine", "envelope", "eye", "fabric", "face", "factory", "falcon", "farm",
      "feather", "fence", "field", "finger", "fire", "fish", "flag", "flame", "flower", "flute",
      "fog", "forest", "fork", "fountain", "fox", "frog", "fruit", "garage", "garden", "gate",
      "ghost", "giraffe", "glass", "glove", "goat", "gold", "grape", "grass", "guitar", "hammer",
      "harbor", "hat", "hawk", "heart", "helmet", "hill", "honey", "horse", "hospital", "hotel",
      "house", "island", "jacket", "jar", "jelly", "jewel", "judge", "kettle", "key", "kingdom",
      "kitchen", "kite", "knee", "knife", "ladder", "lake", "lamp", "lantern", "leaf", "lemon",
      "letter", "library", "lion", "lizard", "lock", "magnet", "mango", "map", "marble", "market",
      "meadow", "melon", "mirror", "monkey", "moon", "mountain", "mouse", "museum", "needle",
      "nest", "net", "night", "notebook", "oak", "ocean", "office", "onion", "orchard", "owl",
      "painter", "palace", "pancake", "paper", "parrot", "pasta", "path", "peach", "pear",
      "pencil", "pepper", "piano", "picture", "pillow", "pilot", "planet", "plate", "pocket",
      "pond", "potato", "puppy", "puzzle", "queen", "rabbit", "radio", "rain", "river", "road",
      "robot", "rocket", "roof", "rope", "rose", "saddle", "sailor", "salad", "sand", "scarf",
      "school", "scissors", "sea", "seed", "shadow", "sheep", "shell", "ship", "shoe", "shop",
      "shovel", "singer", "sister", "sky", "snail", "snake", "soap", "sock", "sofa", "soldier",
      "soup", "spider", "spoon", "square", "stable", "star", "station", "stone", "storm", "stove",
      "street", "sugar", "summer", "sun", "swan", "table", "tail", "teacher", "temple", "tent",
      "thread", "throne", "ticket", "tiger", "toast", "tomato", "tower", "town", "toy", "tractor",
      "train", "tree", "truck", "tulip", "tunnel", "turtle", "umbrella", "valley", "vase",
      "village", "violin", "wagon", "wall", "wallet", "water", "whale", "wheel", "window", "wing",
      "winter", "wizard", "wolf", "yard", "zebra",
  };
  return words;
}

const std::vector<std::string>& ruler_verbs() {
  static const std::vector<std::string> words = {
      "accept", "add", "admire", "agree", "allow", "answer", "appear", "arrange", "arrive", "ask",
      "attach", "bake", "balance", "bathe", "begin", "behave", "believe", "belong", "bless",
      "boil", "borrow", "bounce", "breathe", "brush", "build", "burn", "buy", "calculate", "call",
      "carry", "catch", "change", "chase", "cheer", "chew", "clap", "climb", "collect", "comb",
      "compare", "complain", "cook", "copy", "count", "cover", "crawl", "cross", "cry", "dance",
      "deliver", "describe", "design", "dig", "discover", "divide", "drag", "draw", "dream",
      "dress", "drink", "drive", "drop", "earn", "eat", "enjoy", "enter", "escape", "explain",
      "explore", "fetch", "fill", "find", "fix", "float", "fly", "fold", "follow", "forgive",
      "gather", "glow", "grab", "greet", "grow", "guard", "guess", "hang", "harvest", "help",
      "hide", "hold", "hop", "hug", "hunt", "hurry", "imagine", "invent", "invite", "iron", "jog",
      "join", "juggle", "jump", "kick", "kneel", "knit", "knock", "laugh", "launch", "learn",
      "lend", "lift", "listen", "load", "look", "march", "measure", "melt", "mend", "mix", "move",
      "nod", "notice", "obey", "offer", "open", "order", "pack", "paint", "pass", "peel", "pick",
      "plant", "play", "polish", "pour", "practice", "pray", "print", "pull", "push", "race",
      "rain", "reach", "read", "relax", "remember", "repair", "rescue", "rest", "return", "ride",
      "ring", "roll", "row", "rub", "run", "sail", "scatter", "scrub", "search", "sew", "shake",
      "share", "shine", "shout", "sing", "sit", "skate", "sketch", "ski", "sleep", "slide",
      "smile", "sneeze", "sow", "spell", "spill", "spin", "splash", "stack", "stand", "stir",
      "stretch", "study", "swim", "swing", "talk", "taste", "teach", "tease", "thank", "throw",
      "tickle", "travel", "trust", "twist", "type", "vanish", "visit", "wait", "walk", "wander",
      "wash", "watch", "wave", "weave", "whisper", "whistle", "win", "wink", "wish", "work",
      "wrap", "write", "yawn", "yell", "zoom",
  };
  return words;
}

}  // namespace retain
