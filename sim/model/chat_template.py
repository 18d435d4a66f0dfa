"""The chat template a GGUF file carries, rendered without a template engine.

A model file states its chat format as a Jinja template (`tokenizer.chat_template`). The lab renders one family
of them, ChatML (`<|im_start|>role\\ncontent<|im_end|>\\n` per message, then `<|im_start|>assistant\\n` to ask
for a reply), with or without a default system message that the template inserts when the conversation has
none. The template text is matched against that shape, the default system message read out of it, and anything
else is refused: a template the lab cannot render is never guessed at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sim.refusal import Misuse

ROLES = ("system", "user", "assistant")
START, END = "<|im_start|>", "<|im_end|>"

# The template text with whitespace between tags removed, the default system message captured (no quote or brace
# in it, so the literal cannot end early). Reading a model file's metadata is reading data, not text we wrote.
_WITH_DEFAULT = re.compile(
    r"\{%-?\s*for message in messages\s*-?%\}"
    r"\{%-?\s*if loop\.first and messages\[0\]\['role'\] != 'system'\s*-?%\}"
    r"\{\{-?\s*'<\|im_start\|>system\n(?P<system>[^'{}\\]*)<\|im_end\|>\n'\s*-?\}\}"
    r"\{%-?\s*endif\s*-?%\}"
    r"\{\{-?\s*'<\|im_start\|>' \+ message\['role'\] \+ '\n' \+ message\['content'\] \+ '<\|im_end\|>' \+ '\n'\s*-?\}\}"
    r"\{%-?\s*endfor\s*-?%\}"
    r"\{%-?\s*if add_generation_prompt\s*-?%\}\{\{-?\s*'<\|im_start\|>assistant\n'\s*-?\}\}\{%-?\s*endif\s*-?%\}"
)
_PLAIN = re.compile(
    r"\{%-?\s*for message in messages\s*-?%\}"
    r"\{\{-?\s*'<\|im_start\|>' \+ message\['role'\] \+ '\n' \+ message\['content'\] \+ '<\|im_end\|>' \+ '\n'\s*-?\}\}"
    r"\{%-?\s*endfor\s*-?%\}"
    r"\{%-?\s*if add_generation_prompt\s*-?%\}\{\{-?\s*'<\|im_start\|>assistant\n'\s*-?\}\}\{%-?\s*endif\s*-?%\}"
)


class TemplateNotSupported(ValueError):
    """The file's chat template is not ChatML of a shape this module renders."""


@dataclass(frozen=True)
class ChatTemplate:
    """ChatML with an optional default system message (used when the first message is not a system one)."""

    default_system: str | None = None

    @classmethod
    def from_jinja(cls, template: str) -> ChatTemplate:
        squeezed = re.sub(r"(%\}|\}\})\s+(\{%|\{\{)", r"\1\2", template.strip())
        if (m := _WITH_DEFAULT.fullmatch(squeezed)) is not None:
            return cls(default_system=m.group("system"))
        if _PLAIN.fullmatch(squeezed) is not None:
            return cls()
        raise TemplateNotSupported("the chat template is not ChatML of a shape the lab renders")

    def render(self, messages: list[tuple[str, str]], *, add_generation_prompt: bool = True) -> str:
        """messages: (role, content) pairs, role one of ROLES. The text the model reads, special tokens spelled
        out (the tokenizer turns each into its one id)."""
        if not messages:
            raise Misuse("a chat needs at least one message")
        parts = []
        if self.default_system is not None and messages[0][0] != "system":
            parts.append(f"{START}system\n{self.default_system}{END}\n")
        for role, content in messages:
            if role not in ROLES:
                raise Misuse(f"role must be one of {ROLES}, got {role!r}")
            parts.append(f"{START}{role}\n{content}{END}\n")
        if add_generation_prompt:
            parts.append(f"{START}assistant\n")
        return "".join(parts)
