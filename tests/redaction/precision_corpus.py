"""A deterministic corpus of strings that are NOT secrets, for the redaction precision tests
(``test_redaction_precision.py``); this module holds no tests.

Every family is a list of realistic strings that a model, a tool or a user routinely produces
and that merely *look* like credentials to a careless rule: branch and pod names with ``sk-``
inside a word (``task-1234-...``, ``disk-monitor-...``), ``@`` and ``://`` in image references,
the words "token", "basic" and "bearer" in prose, pagination cursors, random base64 blobs
(encrypted reasoning, images). Redaction must leave every one of them byte for byte.

Generation uses one seeded :class:`random.Random` per family, no network and no data files:
``corpus()`` returns the same strings on every run and every machine. No string holds a line
break (the tests join strings with ``"\\n"``), except where a family says so.
"""

from __future__ import annotations

import base64
import random
import string
import uuid
import zlib
from collections.abc import Callable

__all__ = ["BLOB_FAMILIES", "FAMILIES", "SEED", "corpus", "family"]

SEED = 20240611

HEX = "0123456789abcdef"
ALNUM_LOWER = string.ascii_lowercase + string.digits
# Kubernetes pod-template hashes and pod suffixes use this alphabet (no vowels, no 0/1/3).
K8S_SAFE = "bcdfghjklmnpqrstvwxz2456789"
URLSAFE = string.ascii_letters + string.digits + "-_"
STD_B64 = string.ascii_letters + string.digits + "+/"


def _rng(name: str) -> random.Random:
    return random.Random(SEED ^ zlib.crc32(name.encode()))


def _pick(rng: random.Random, items) -> str:
    return items[rng.randrange(len(items))]


def _chars(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(alphabet[rng.randrange(len(alphabet))] for _ in range(n))


def _hex(rng: random.Random, n: int) -> str:
    return _chars(rng, HEX, n)


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _unique(
    rng: random.Random,
    make: Callable[[random.Random], str],
    count: int,
    fixed: list[str] | tuple[str, ...] = (),
) -> list[str]:
    """``fixed`` then strings made by ``make``, ``count`` distinct strings in all."""
    seen: dict[str, None] = dict.fromkeys(fixed)
    attempts = 0
    while len(seen) < count:
        attempts += 1
        if attempts > count * 50:
            raise RuntimeError("family generator cannot make enough distinct strings")
        value = make(rng)
        assert "\n" not in value and "\r" not in value, value
        seen.setdefault(value, None)
    return list(seen)


# ============================================================================ vocabulary

# Words chosen so that many slugs hold "sk-", "ask", "key", "token", "basic" or "bearer" inside
# or next to them: what an over-eager rule trips on.
SLUG_WORDS = [
    "fix",
    "login",
    "redirect",
    "risk",
    "disk",
    "task",
    "flask",
    "desk",
    "mask",
    "whisk",
    "ask",
    "kiosk",
    "dusk",
    "husk",
    "tusk",
    "musk",
    "brisk",
    "basket",
    "token",
    "key",
    "basic",
    "bearer",
    "secret",
    "password",
    "reset",
    "auth",
    "oauth",
    "session",
    "cache",
    "cleanup",
    "refactor",
    "upgrade",
    "deps",
    "api",
    "client",
    "server",
    "worker",
    "queue",
    "retry",
    "timeout",
    "parser",
    "schema",
    "migration",
    "billing",
    "invoice",
    "export",
    "import",
    "report",
    "dashboard",
    "search",
    "index",
    "tokenizer",
    "keyboard",
    "monkey",
    "hotkey",
    "turkey",
    "whiskey",
    "jockey",
    "hockey",
    "assessment",
    "framework",
    "notes",
    "pagination",
    "cursor",
    "page",
    "limit",
    "rate",
    "logging",
    "metrics",
    "tracing",
    "docs",
    "readme",
    "typo",
    "lint",
    "tests",
    "flaky",
    "ci",
    "build",
    "release",
    "v2",
    "v3",
    "mobile",
    "android",
    "ios",
    "web",
    "ui",
    "ux",
    "modal",
    "button",
    "form",
    "upload",
    "download",
    "sqlalchemy",
    "pydantic",
    "celery",
    "redis",
    "postgres",
    "kafka",
    "s3",
    "gcs",
    "azure",
    "terraform",
    "helm",
    "k8s",
    "docker",
    "nginx",
    "ingress",
    "tls",
    "cert",
]
BRANCH_PREFIXES = [
    "feature/",
    "fix/",
    "bugfix/",
    "hotfix/",
    "release/",
    "chore/",
    "docs/",
    "refactor/",
    "perf/",
    "test/",
    "ci/",
    "spike/",
    "experiment/",
    "user/jdoe/",
    "dependabot/pip/",
    "renovate/",
    "wip/",
    "",
]
TICKET_PREFIXES = [
    "task",
    "TASK",
    "JIRA",
    "PROJ",
    "ENG",
    "OPS",
    "BUG",
    "issue",
    "gh",
    "risk",
    "desk",
    "ask",
]

DEPLOYMENTS = [
    "api-server",
    "worker",
    "web",
    "frontend",
    "backend",
    "nginx-ingress-controller",
    "redis-master",
    "celery-worker",
    "celery-beat",
    "risk-engine",
    "risk-scoring-api",
    "disk-monitor",
    "disk-cleanup",
    "task-runner",
    "task-scheduler",
    "flask-app",
    "desk-service",
    "kiosk-display",
    "basket-service",
    "token-service",
    "keycloak",
    "auth-proxy",
    "oauth2-proxy",
    "session-store",
    "search-indexer",
    "metrics-exporter",
    "prometheus-server",
    "grafana",
    "loki",
    "tempo",
    "coredns",
    "kube-proxy",
    "cert-manager",
    "cert-manager-webhook",
    "external-dns",
    "cluster-autoscaler",
    "ask-bot",
    "whisk-controller",
]
STATEFULSETS = [
    "postgres",
    "kafka-broker",
    "zookeeper",
    "redis-cluster",
    "elasticsearch-data",
    "mongodb",
    "etcd",
    "rabbitmq",
    "risk-ledger",
    "disk-cache",
]

ADJECTIVES = [
    "key",
    "basic",
    "main",
    "central",
    "first",
    "second",
    "real",
    "simple",
    "common",
    "core",
    "hidden",
    "open",
    "shared",
    "new",
    "old",
    "big",
    "small",
    "useful",
]
NOUNS = [
    "point",
    "idea",
    "stuff",
    "plan",
    "question",
    "issue",
    "takeaway",
    "insight",
    "result",
    "finding",
    "difference",
    "problem",
    "reason",
    "step",
    "lesson",
    "feature",
    "concept",
]
TOPICS = [
    "tokenomics",
    "the budget",
    "the migration",
    "the API",
    "the roadmap",
    "the schema",
    "our login flow",
    "the release",
    "the billing system",
    "the onboarding",
    "the audit",
]
ORDINALS = [
    "1st",
    "2nd",
    "3rd",
    "4th",
    "5th",
    "6th",
    "7th",
    "8th",
    "9th",
    "10th",
    "11th",
    "12th",
    "21st",
    "22nd",
]
PRODUCTS = ["plan", "tier", "package", "subscription", "model", "edition", "course", "kit"]

PACKAGES = [
    "sk-learn",
    "scikit-learn",
    "sk-video",
    "flask-sqlalchemy",
    "flask-login",
    "flask-wtf",
    "flask-restx",
    "flask-cors",
    "flask-migrate",
    "flask-caching",
    "flask-limiter",
    "django-rest-framework",
    "pytest-asyncio",
    "risk-assessment-framework-notes",
    "disk-usage-analyzer",
    "task-queue-manager",
    "desk-booking-service",
    "whisk-cli",
    "hf_transfer",
    "hf_xet",
    "basket-optimizer",
    "token-bucket",
    "keyring",
    "keychain-access",
    "python-dotenv",
    "secretstorage",
    "passlib",
    "bcrypt",
    "argon2-cffi",
]
HF_IDENTIFIERS = [
    "hf_AutoModelForCausalLM",
    "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",
    "hf_AutoTokenizer",
    "hf_PreTrainedTokenizerFast",
    "hf_hub_download",
    "hf_hub_url",
    "hf_api",
    "hf_token_path",
    "hf_DataCollatorForLanguageModeling",
    "hf_TrainingArguments",
    "hf_BitsAndBytesConfig",
    "hf_AutoModelForTokenClassification",
    "hf_WhisperForConditionalGeneration",
    "hf_LlamaForCausalLM",
    "hf_MistralForCausalLM",
    "hf_Qwen2ForCausalLM",
]
CAMEL_PARTS = [
    "Auto",
    "Model",
    "For",
    "Causal",
    "LM",
    "Token",
    "Key",
    "Basic",
    "Bearer",
    "Secret",
    "Password",
    "Page",
    "Cursor",
    "Session",
    "Config",
    "Manager",
    "Factory",
    "Builder",
    "Provider",
    "Handler",
    "Client",
    "Server",
    "Risk",
    "Disk",
    "Task",
]
SNAKE_PARTS = [
    "token",
    "key",
    "page",
    "next",
    "cursor",
    "max",
    "min",
    "count",
    "size",
    "limit",
    "risk",
    "disk",
    "task",
    "desk",
    "ask",
    "basic",
    "bearer",
    "secret",
    "password",
    "policy",
    "length",
    "budget",
    "usage",
    "window",
    "bucket",
    "refill",
    "rate",
    "id",
    "v2",
]

HOSTS = [
    "example.com",
    "docs.example.org",
    "api.example.net",
    "www.wikipedia.org",
    "github.com",
    "gitlab.example.com",
    "news.ycombinator.com",
    "stackoverflow.com",
    "pypi.org",
    "registry.npmjs.org",
    "console.cloud.google.com",
    "s3.amazonaws.com",
    "shop.example.co.uk",
    "localhost:8080",
    "127.0.0.1:5000",
    "intranet.corp.example",
]
PATHS = [
    "search",
    "docs/auth/basic",
    "docs/bearer-token-auth",
    "wiki/Token_economy",
    "questions/1234567/what-is-a-bearer-token",
    "api/v1/items",
    "api/v2/users/42/orders",
    "repos/acme/risk-engine/pulls",
    "products/basic-plan",
    "blog/2024/05/key-takeaways",
    "en/latest/api.html",
    "p/sk-learn",
    "project/flask-sqlalchemy/3.1.1",
    "tasks/1234",
    "branches/feature%2Frisk-2024-v2",
    "disk/by-uuid",
    "u/jdoe/passwords-are-hard",
]
QUERY_NAMES = [
    "q",
    "page",
    "sort",
    "order",
    "lang",
    "hl",
    "ref",
    "utm_source",
    "utm_medium",
    "utm_campaign",
    "per_page",
    "offset",
    "limit",
    "filter",
    "tab",
    "view",
    "start",
    "id",
    "v",
    "format",
    "cursor",
    "after",
    "before",
    "since",
    "sort_key",
    "max_tokens",
    "tokenizer",
    "keyword",
    "category",
    "next",
]
QUERY_WORDS = [
    "basic+auth",
    "bearer+token",
    "token+economics",
    "api+key+rotation",
    "password+reset",
    "secret+santa",
    "sk-learn",
    "flask-sqlalchemy",
    "desc",
    "asc",
    "en",
    "de",
    "newsletter",
    "twitter",
    "spring_sale",
    "created_at",
    "open",
    "risk-2024-v2",
    "2",
    "50",
    "100",
    "true",
    "json",
    "all",
    "cl100k_base",
]

SHELL_LINES = [
    "git checkout -b {branch}",
    "git push --set-upstream origin {branch}",
    "git log --oneline {sha7}..HEAD",
    "kubectl logs -f {pod} -n production",
    "kubectl describe pod {pod}",
    "docker pull {digest_ref}",
    "pip install {package}=={semver}",
    "curl -s '{url}' | jq .",
    "export PAGE_SIZE={n}",
    "export MAX_TOKENS={n}",
    "mount /dev/disk/by-uuid/{uuid} /mnt/data",
    'echo "token budget: {n}"',
    "grep -rn 'password_policy' src/ | wc -l",
    "ssh -i ~/.ssh/id_ed25519 deploy@bastion.example.com",
    'curl -H "Authorization: Bearer $API_TOKEN" {url}',
    "helm upgrade --install risk-engine ./chart --version {semver}",
]
PYTHON_LINES = [
    "tokens = tokenizer.encode(text, add_special_tokens=False)",
    "for key, value in sorted(config.items()):",
    'next_page_token = response.get("nextPageToken")',
    'page_token = data["next_page_token"] if data.get("has_more") else None',
    "from sklearn.model_selection import train_test_split",
    'model = AutoModelForCausalLM.from_pretrained("{repo}")',
    'assert len(password) >= MIN_PASSWORD_LENGTH, "too short"',
    'session = requests.Session(); session.headers["Accept"] = "application/json"',
    'cursor = base64.urlsafe_b64encode(json.dumps({{"offset": {n}}}).encode())',
    'if token.type == TokenType.KEYWORD and token.value == "basic":',
    "risk_score = compute_risk(task_id={n}, threshold=0.{n})",
    'db.session.add(Task(name="{branch}"))',
    'print(f"{{key}}={{value}}")',
    "secret_santa = random.sample(names, k=len(names))",
    'return {{"items": items, "cursor": "{cursor}"}}',
]
JS_LINES = [
    "const key = Object.keys(obj)[0];",
    'const {{ data, nextCursor }} = await fetchPage("{cursor}");',
    "fetch(`{url}`).then((r) => r.json());",
    "const tokens = text.split(/\\s+/).filter(Boolean);",
    "export const basicPlan = {{ price: {n}, seats: 5 }};",
    'if (event.key === "Enter") submitForm();',
    'localStorage.setItem("theme", "dark");',
    'const bearer = messenger.find((m) => m.role === "courier");',
    'router.push("/tasks/{n}?tab=details");',
    'const digest = "sha256:{hex64}";',
]


# ============================================================================ families


def _branch(rng: random.Random) -> str:
    words = [_pick(rng, SLUG_WORDS) for _ in range(rng.randint(1, 4))]
    slug = "-".join(words)
    shape = rng.randrange(8)
    if shape == 0:
        return f"{_pick(rng, TICKET_PREFIXES)}-{rng.randint(1, 99999)}-{slug}"
    if shape == 1:
        return f"{_pick(rng, BRANCH_PREFIXES)}{_pick(rng, TICKET_PREFIXES)}-{rng.randint(1, 9999)}-{slug}"
    if shape == 2:
        return f"{_pick(rng, BRANCH_PREFIXES)}{slug}-{rng.randint(2019, 2026)}-v{rng.randint(1, 9)}"
    if shape == 3:
        return f"release/{rng.randint(0, 9)}.{rng.randint(0, 40)}.{rng.randint(0, 20)}"
    if shape == 4:
        return f"{_pick(rng, BRANCH_PREFIXES)}{slug}"
    if shape == 5:
        return f"dependabot/npm_and_yarn/{_pick(rng, PACKAGES)}-{rng.randint(1, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}"
    if shape == 6:
        return f"{_pick(rng, BRANCH_PREFIXES)}{slug}_{rng.randint(1, 999)}"
    return f"task-{rng.randint(100, 9999)}-{slug}"


def branch_names() -> list[str]:
    fixed = [
        "task-1234-fix-login-redirect",
        "feature/risk-2024-v2",
        "fix/flask-session-cookie",
        "bugfix/disk-cleanup",
        "hotfix/ask-timeout-30s",
        "feature/desk-booking-2",
    ]
    rng = _rng("branch_names")
    return _unique(rng, _branch, 1300, fixed)


def _pod(rng: random.Random) -> str:
    if rng.randrange(5) == 0:
        return f"{_pick(rng, STATEFULSETS)}-{rng.randint(0, 12)}"
    name = _pick(rng, DEPLOYMENTS)
    if rng.randrange(4) == 0:
        return f"{name}-{_chars(rng, K8S_SAFE, 5)}"  # a DaemonSet or Job pod
    return f"{name}-{_chars(rng, K8S_SAFE, rng.choice([9, 10]))}-{_chars(rng, K8S_SAFE, 5)}"


def pod_names() -> list[str]:
    rng = _rng("pod_names")
    return _unique(rng, _pod, 900, ["api-server-7d9f8b6c5d-x2k4p"])


def _disk_path(rng: random.Random) -> str:
    shape = rng.randrange(6)
    if shape == 0:
        return f"/dev/disk/by-uuid/{_uuid(rng)}"
    if shape == 1:
        return f"disk-by-uuid-{_uuid(rng)}"
    if shape == 2:
        escaped = _uuid(rng).replace("-", "\\x2d")  # systemd's escaping of "-"
        return f"dev-disk-by\\x2duuid-{escaped}.device"
    if shape == 3:
        return f"/dev/disk/by-partuuid/{_hex(rng, 8)}-{rng.randint(1, 9):02d}"
    if shape == 4:
        return f"UUID={_uuid(rng)} /data ext4 defaults,noatime 0 2"
    return f"/dev/disk/by-id/nvme-Samsung_SSD_980_PRO_1TB_S5GXNX0R{_chars(rng, string.ascii_uppercase + string.digits, 6)}"


def disk_by_uuid_paths() -> list[str]:
    rng = _rng("disk_by_uuid_paths")
    return _unique(rng, _disk_path, 500)


def uuids() -> list[str]:
    rng = _rng("uuids")
    contexts = [
        "{}",
        "{}",
        "{}",
        "request id {}",
        "trace_id={}",
        "{}".upper(),
        "urn:uuid:{}",
        "{{{}}}",
    ]

    def make(rng: random.Random) -> str:
        value = _uuid(rng)
        template = _pick(rng, contexts)
        return template.format(value.upper() if rng.randrange(6) == 0 else value)

    return _unique(rng, make, 700)


def git_shas() -> list[str]:
    rng = _rng("git_shas")

    def make(rng: random.Random) -> str:
        shape = rng.randrange(5)
        if shape == 0:
            return _hex(rng, 40)
        if shape == 1:
            return _hex(rng, 7)
        if shape == 2:
            return f"commit {_hex(rng, 40)}"
        if shape == 3:
            return f"{_hex(rng, 7)} Merge branch '{_branch(rng)}'"
        return f"{_hex(rng, 7)}..{_hex(rng, 7)}"

    return _unique(rng, make, 900)


def _digest_ref(rng: random.Random) -> str:
    image = _pick(
        rng,
        [
            "alpine",
            "python",
            "node",
            "nginx",
            "postgres",
            "redis",
            "ubuntu",
            "busybox",
            "golang",
            "debian",
        ],
    )
    tag = f"{rng.randint(1, 22)}.{rng.randint(0, 20)}"
    digest = _hex(rng, 64)
    shape = rng.randrange(6)
    if shape == 0:
        return f"docker://{image}:{tag}@sha256:{digest}"
    if shape == 1:
        return f"{image}:{tag}@sha256:{digest}"
    if shape == 2:
        return f"ghcr.io/acme/{_pick(rng, DEPLOYMENTS)}@sha256:{digest}"
    if shape == 3:
        return f"docker.io/library/{image}@sha256:{digest}"
    if shape == 4:
        return f"oci://registry.example.com/charts/{_pick(rng, DEPLOYMENTS)}:{tag}@sha256:{digest}"
    return f"sha256:{digest}"


def docker_digests() -> list[str]:
    rng = _rng("docker_digests")
    return _unique(rng, _digest_ref, 500)


def _semver_core(rng: random.Random) -> str:
    core = f"{rng.randint(0, 12)}.{rng.randint(0, 40)}.{rng.randint(0, 30)}"
    suffix = rng.randrange(6)
    if suffix == 0:
        core += f"-{_pick(rng, ['alpha', 'beta', 'rc', 'pre', 'dev'])}{rng.randint(1, 12)}"
    elif suffix == 1:
        core += f"-{_pick(rng, ['alpha', 'beta', 'rc'])}.{rng.randint(1, 12)}"
    elif suffix == 2:
        core += f"+build.{rng.randint(1, 9999)}"
    elif suffix == 3:
        core += f"-beta{rng.randint(1, 9)}+{_hex(rng, 7)}"
    return core


def semver_strings() -> list[str]:
    rng = _rng("semver_strings")
    contexts = [
        "{}",
        "{}",
        "v{}",
        "version {}",
        "version token {}",
        "release {} is out",
        "requires >= {}",
        "Token {} release notes",
        "Basic {} edition",
        "bearer {} image",
    ]

    def make(rng: random.Random) -> str:
        return _pick(rng, contexts).format(_semver_core(rng))

    return _unique(rng, make, 700, ["1.2.3-beta4", "version token 1.2.3-beta4"])


def _url(rng: random.Random) -> str:
    scheme = "http" if rng.randrange(6) == 0 else "https"
    url = f"{scheme}://{_pick(rng, HOSTS)}/{_pick(rng, PATHS)}"
    params = [
        f"{_pick(rng, QUERY_NAMES)}={_pick(rng, QUERY_WORDS)}" for _ in range(rng.randint(0, 4))
    ]
    if params:
        url += "?" + "&".join(params)
    if rng.randrange(5) == 0:
        url += "#" + _pick(rng, ["token", "basic-auth", "key-points", "section-2", "top"])
    return url


def urls() -> list[str]:
    fixed = [
        "https://example.com/search?q=basic+auth&page=2&sort=desc",
        "ssh://git@github.com/acme/risk-engine.git",
        "git@github.com:acme/flask-app.git",
        "mailto:support@example.com",
        "https://example.com/a?b=c;d=e",
    ]
    rng = _rng("urls")
    return _unique(rng, _url, 1100, fixed)


def page_tokens() -> list[str]:
    rng = _rng("page_tokens")

    def make(rng: random.Random) -> str:
        shape = rng.randrange(6)
        if shape == 0:  # Google-style: base64 of a small protobuf, no padding
            raw = bytes([0x0A, rng.randrange(0x20, 0x30)]) + rng.randbytes(rng.randint(10, 26))
            return base64.b64encode(raw).decode().rstrip("=")
        if shape == 1:  # base64 of a JSON offset (starts with "eyJ", no dots)
            body = f'{{"offset":{rng.randint(0, 99999)},"sort":"{_pick(rng, ["asc", "desc"])}"}}'
            return base64.urlsafe_b64encode(body.encode()).decode().rstrip("=")
        if shape == 2:  # Slack-style next_cursor
            return base64.b64encode(
                f"user:U0{_chars(rng, string.ascii_uppercase + string.digits, 8)}".encode()
            ).decode()
        if shape == 3:
            return _chars(rng, URLSAFE, rng.randint(16, 40))
        if shape == 4:
            return _chars(rng, STD_B64, rng.randint(16, 40))
        return base64.urlsafe_b64encode(rng.randbytes(rng.randint(12, 30))).decode()

    return _unique(rng, make, 1600, ["CiAKGjBpNDd2Nmp2Zml6"])


PROSE_FIXED = [
    "the key point is basic stuff",
    "bearer of news",
    "Token economics",
    "Basic 2000-series",
    "Bearer 2nd-generation-bonds",
    "In 2024 the basic plan",
    "The bearer of bad news arrived at 9am.",
    "A token gesture, nothing more.",
    "Store the password in the vault, never in code.",
    "The secret to good sourdough is time.",
    "Token 2023/2024 season",
    "the token 0x1234abcd is here",
    "xoxo-love-you-forever-2",
    "Miss you already, xoxo-hugs-from-2024",
]


def prose() -> list[str]:
    rng = _rng("prose")
    templates = [
        lambda r: (
            f"the {_pick(r, ADJECTIVES)} {_pick(r, NOUNS)} is {_pick(r, ['basic', 'simple', 'subtle'])} stuff"
        ),
        lambda r: (
            f"{_pick(r, ['Basic', 'Bearer', 'Token'])} {_pick(r, ORDINALS)}-generation-{_pick(r, ['bonds', 'chips', 'tests', 'models'])}"
        ),
        lambda r: f"{_pick(r, ['Basic', 'Token', 'Bearer'])} {r.randint(1000, 9000)}-series",
        lambda r: (
            f"In {r.randint(2000, 2030)} the basic {_pick(r, PRODUCTS)} cost ${r.randint(5, 99)} a month."
        ),
        lambda r: (
            f"Token economics of {_pick(r, TOPICS)} is a {_pick(r, ADJECTIVES)} {_pick(r, NOUNS)}."
        ),
        lambda r: (
            f"The bearer of {_pick(r, ['news', 'good news', 'bad tidings', 'the flag', 'this card'])} is {_pick(r, ['late', 'here', 'tired', 'welcome'])}."
        ),
        lambda r: (
            f"The context window holds {r.randint(4, 200)}k tokens; the token limit is {r.randint(256, 8192)}."
        ),
        lambda r: (
            f"Use a {_pick(r, ['strong', 'unique', 'long'])} password: at least {r.randint(8, 20)} characters and a digit."
        ),
        lambda r: (
            f"The secret of {_pick(r, TOPICS)} is {_pick(r, ['patience', 'testing', 'good naming', 'small steps'])}."
        ),
        lambda r: (
            f"Press the {_pick(r, ['Enter', 'Escape', 'Tab', 'F5'])} key to {_pick(r, ['continue', 'cancel', 'refresh'])}."
        ),
        lambda r: (
            f"Basic {_pick(r, ['English', 'arithmetic', 'income', 'research'])} {r.randint(101, 499)} starts on Monday."
        ),
        lambda r: (
            f"The basic plan {r.randint(2019, 2026)} edition includes {r.randint(1, 50)} seats."
        ),
        lambda r: f"Bearer bonds were common until {r.randint(1950, 1990)}.",
        lambda r: f"Each token costs about {r.randint(1, 9)}.{r.randint(0, 99)} microcents.",
        lambda r: (
            f"The key takeaway from Q{r.randint(1, 4)} {r.randint(2019, 2026)}: ship smaller changes."
        ),
        lambda r: f"We reset the password policy to {r.randint(60, 365)} days.",
        lambda r: f"token {r.randint(1, 99)} of {r.randint(100, 999)} in the sequence",
        lambda r: (
            f"Key {r.randint(2019, 2026)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d} milestone: beta"
        ),
        lambda r: f"Token bucket refills {r.randint(1, 100)} tokens per second.",
        lambda r: (
            f"Basic auth is deprecated in {_pick(r, ['our API', 'v3', 'the new gateway'])}; use OAuth."
        ),
        lambda r: (
            f"The bearer token header is documented in section {r.randint(1, 12)}.{r.randint(1, 9)}."
        ),
        lambda r: (
            f"secret santa draw on {_pick(r, ['Friday', 'Monday'])}, budget {r.randint(10, 50)} euros"
        ),
    ]

    def make(rng: random.Random) -> str:
        return _pick(rng, templates)(rng)

    return _unique(rng, make, 1300, PROSE_FIXED)


def identifiers() -> list[str]:
    rng = _rng("identifiers")

    def make(rng: random.Random) -> str:
        shape = rng.randrange(7)
        if shape == 0:
            return _pick(rng, PACKAGES) + _pick(
                rng,
                ["", "", f"=={_semver_core(rng)}", f">={rng.randint(1, 5)}.{rng.randint(0, 9)}"],
            )
        if shape == 1:
            return _pick(rng, HF_IDENTIFIERS) + _pick(rng, ["", "", f"_{rng.randint(1, 9)}", "_v2"])
        if shape == 2:
            return "".join(_pick(rng, CAMEL_PARTS) for _ in range(rng.randint(2, 5)))
        if shape == 3:
            return "_".join(_pick(rng, SNAKE_PARTS) for _ in range(rng.randint(2, 4)))
        if shape == 4:
            return "_".join(_pick(rng, SNAKE_PARTS) for _ in range(rng.randint(2, 4))).upper()
        if shape == 5:
            return "-".join(_pick(rng, SLUG_WORDS) for _ in range(rng.randint(2, 5))) + _pick(
                rng, ["", "-notes", f"-{rng.randint(1, 2030)}"]
            )
        return f"{_pick(rng, ['risk', 'disk', 'task', 'desk', 'ask', 'whisk', 'kiosk'])}-{_pick(rng, SLUG_WORDS)}-{_pick(rng, SLUG_WORDS)}-{rng.randint(1, 99)}"

    fixed = [
        "sk-learn",
        "hf_AutoModelForCausalLM",
        "ASIAPACIFIC2024Q3REV",
        "risk-assessment-framework-notes",
        "flask-sqlalchemy",
    ]
    return _unique(rng, make, 900, fixed)


def code_snippets() -> list[str]:
    rng = _rng("code_snippets")
    lines = SHELL_LINES + PYTHON_LINES + JS_LINES

    def make(rng: random.Random) -> str:
        return _pick(rng, lines).format(
            branch=_branch(rng),
            sha7=_hex(rng, 7),
            pod=_pod(rng),
            digest_ref=_digest_ref(rng),
            package=_pick(rng, PACKAGES),
            semver=_semver_core(rng),
            url=_url(rng),
            n=rng.randint(1, 9999),
            uuid=_uuid(rng),
            repo=_pick(
                rng,
                ["meta-llama/Llama-3.1-8B", "mistralai/Mistral-7B-v0.3", "gpt2", "Qwen/Qwen2.5-7B"],
            ),
            cursor=_chars(rng, URLSAFE, rng.randint(16, 40)),
            hex64=_hex(rng, 64),
        )

    return _unique(rng, make, 900)


def urlsafe_blobs() -> list[str]:
    """2,000 random url-safe base64 blobs of 1-16 KB: encrypted reasoning, opaque state."""
    rng = _rng("urlsafe_blobs")
    return [
        base64.urlsafe_b64encode(rng.randbytes(rng.randint(768, 12288))).decode()
        for _ in range(2000)
    ]


def base64_images() -> list[str]:
    """200 standard-base64 "images" (random bytes behind a PNG or JPEG signature), 1-64 KB."""
    rng = _rng("base64_images")
    signatures = [b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", b"\xff\xd8\xff\xe0\x00\x10JFIF\x00"]
    images = []
    for number in range(200):
        size = rng.randint(768, 48 * 1024)
        images.append(base64.b64encode(signatures[number % 2] + rng.randbytes(size)).decode())
    return images


FAMILIES: dict[str, Callable[[], list[str]]] = {
    "branch_names": branch_names,
    "pod_names": pod_names,
    "disk_by_uuid_paths": disk_by_uuid_paths,
    "uuids": uuids,
    "git_shas": git_shas,
    "docker_digests": docker_digests,
    "semver_strings": semver_strings,
    "urls": urls,
    "page_tokens": page_tokens,
    "prose": prose,
    "identifiers": identifiers,
    "code_snippets": code_snippets,
    "urlsafe_blobs": urlsafe_blobs,
    "base64_images": base64_images,
}
#: The families of large opaque blobs (kept out of places where every string is streamed).
BLOB_FAMILIES = ("urlsafe_blobs", "base64_images")

_cache: dict[str, list[str]] = {}


def family(name: str) -> list[str]:
    """One family's strings (generated once per process)."""
    if name not in _cache:
        _cache[name] = FAMILIES[name]()
    return _cache[name]


def corpus() -> dict[str, list[str]]:
    """Every family, by name, in a fixed order."""
    return {name: family(name) for name in FAMILIES}


if __name__ == "__main__":  # a summary: python -m tests.redaction.precision_corpus
    for name, strings in corpus().items():
        print(f"{name:20} {len(strings):6} strings {sum(map(len, strings)):10} chars")
