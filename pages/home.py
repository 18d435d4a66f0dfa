import pandas as pd
import streamlit as st

from app.i18n import lang, page_summary, page_title, section_title, t
from app.present import show_table
from app.registry import PAGES
from app.resources import device_info
from app.urlstate import UrlState
from sim.claims import SEEDS
from sim.words import say
from sim.work.threads import threads_message

st.title(t("home.title"))
url = UrlState("home")  # no controls here; marks the page so the next page knows it is entered
url.show_problems()  # the one value Home reads from the link: lang
st.markdown(t("home.intro"))

st.markdown(t("home.seeds"))
# the Korean original and its English translation side by side, in both languages
st.caption(t("home.seed_sep").join(t("home.seed_item", seed=k, en=en, ko=ko) for k, (ko, en) in SEEDS.items()))

lesson = next(p for p in PAGES if p.slug == "lesson")
st.page_link(lesson.path, label=t("home.lesson_link", title=page_title("lesson"), summary=page_summary("lesson")),
             icon=lesson.icon)
st.caption(t("deploy.home_guide"))

st.subheader(t("home.map"))
rows = [{t("home.col.page"): page_title(p.slug), t("home.col.section"): section_title(p.section),
         t("home.col.shows"): page_summary(p.slug)} for p in PAGES if p.slug != "home"]
# a static table: every row shown and each summary wrapped (a scrolling grid cut them off at its right edge and hid
# the last rows under its fold)
st.table(pd.DataFrame(rows), hide_index=True)  # the sidebar links every page; the table says what each shows

st.subheader(t("home.machine"))
info = device_info()
c = st.columns(4)
why_key, why_fields = threads_message()
c[0].metric(t("home.m.device"), info.device)
c[1].metric(t("home.m.dtype"), info.dtype)
c[2].metric(t("home.m.threads") if info.device == "cpu" else t("home.m.gpu_memory"),
            str(info.num_threads) if info.device == "cpu" else t("home.gib", x=f"{info.memory_gib:.1f}"),
            help=t("home.threads_help", why=t(why_key, **why_fields)) if info.device == "cpu" else None)
c[3].metric(t("home.m.torch"), info.torch_version)
st.caption(t("home.device_caption", name=info.device_name))
st.markdown(t("home.sdpa"))


def why_not(reason) -> str:
    """The lab's own reason (a message value) in the page language; torch's messages as torch wrote them."""
    return say(lang(), reason)


show_table(
    pd.DataFrame([{t("home.col.backend"): b.name, t("home.col.runs"): t("home.yes") if b.runs else t("home.no"),
                   t("home.col.why"): why_not(b.reason)} for b in info.backends]),
    hide_index=True, width="stretch",
)
