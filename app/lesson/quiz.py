"""A check-yourself question in the page: an answer box (or choices), the computed feedback (a hint when the
answer is wrong), and the answer itself only after a right answer or when the class asks for it."""

from __future__ import annotations

import streamlit as st

from app.i18n import lang, t
from app.text import plain
from sim.lesson.quiz import MAX_ANSWER_CHARS, Question
from sim.words import say


def ask(q: Question) -> None:
    L = lang()
    with st.container(border=True):
        st.markdown(t("lesson.quiz.head", prompt=say(L, q.prompt)))
        key = f"quiz_{q.key}"
        if q.choices:
            given = st.radio(t("lesson.quiz.answer"), q.choices, key=key, index=None, label_visibility="collapsed",
                             format_func=lambda c: say(L, q.label(c)))
        else:
            given = st.text_input(t("lesson.quiz.answer_unit", unit=q.unit) if q.unit else t("lesson.quiz.answer"),
                                  key=key, max_chars=MAX_ANSWER_CHARS)
        feedback = q.check(given)
        if feedback is not None:
            (st.success if feedback.correct else st.warning)(plain(say(L, feedback.message)))
        if feedback is None or not feedback.correct:  # a right answer already comes with the worked answer
            if st.toggle(t("lesson.quiz.show"), key=f"{key}_show"):
                st.info(plain(say(L, q.reveal())))
