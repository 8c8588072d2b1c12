"""MCP prompts: conversation starters a client offers its user."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from memvault.mcp import setup


def register(server: MCPServer, *, extended: bool = True) -> None:
    @server.prompt(
        name="memory-conversation",
        title="Converse with memory",
        description="Start a conversation that recalls what is known and keeps memory up to date.",
    )
    def memory_conversation(user_id: str, topic: str = "") -> str:
        about = f" The conversation is about: {topic}." if topic else ""
        return (
            f"You are talking with user `{user_id}`.{about}\n"
            f"First call memory_get_context with user_id `{user_id}`"
            + (f" and query `{topic}`" if topic else "")
            + " and use what it returns. During the conversation, call memory_store for each new durable "
            "preference, decision, instruction or correction (with a stable key when it may change later), and "
            "memory_search when you need something specific. At the end, call memory_ingest with the messages if it "
            "is offered. "
            "Never store secrets."
        )

    if not extended:
        return  # the review works with memory_list, memory_history and the other extended tools

    @server.prompt(
        name="memory-review",
        title="Review stored memory",
        description="Review what is stored about a user: find contradictions, stale facts and duplicates.",
    )
    def memory_review(user_id: str = "") -> str:
        who = f" for user `{user_id}`" if user_id else ""
        return (
            f"Review the stored memories{who}. Page through them with memory_list"
            + (f" (user_id `{user_id}`)" if user_id else "")
            + ", and use memory_history where a memory has versions. List: (1) contradictions (two current "
            "memories that cannot both be true), (2) stale facts (dated, or superseded in the world), "
            "(3) duplicates, (4) tentative memories that the evidence confirms. For each, propose the fix "
            "(memory_archive, memory_update, memory_promote, or a new memory_store with the same key) and "
            "apply it only after the user agrees."
        )

    @server.prompt(
        name="memory-reasoning",
        title="Reason over memory",
        description=(
            "Answer a question from stored memory: recall, check history and contradictions, state confidence, "
            "keep the reasoning as a trace and store the conclusion."
        ),
    )
    def memory_reasoning(question: str, user_id: str = "", session_id: str = "") -> str:
        who = "".join(
            f" {name} `{value}`" for name, value in (("user_id", user_id), ("session_id", session_id)) if value
        )
        scope = f" (with{who})" if who else ""
        return (
            f"Answer this question from what is stored in memory: {question}\n\n"
            f"1. Recall. Call memory_get_context with the question as `query`{scope}. If it is not specific "
            "enough, call memory_search with two or three precise queries (other wordings, the names of the "
            "people, places and projects involved).\n"
            "2. Show your work. If the trace_start, trace_step and trace_complete tools are offered, start a trace "
            "with the question as `task` and record each step (thought, action, observation), so the reasoning "
            "can be reviewed and reused.\n"
            "3. Check what you rely on. Note each memory's date; call memory_history for one that has versions. "
            "When two memories disagree, prefer the newer one and the one with higher confidence, and say which "
            "you chose and why.\n"
            "4. Answer with a confidence (high, medium or low) and the ids of the memories it rests on. Say "
            "plainly what memory does not tell you; do not fill the gaps with guesses.\n"
            "5. Conclude. Complete the trace with the outcome. If the reasoning settled something durable (a "
            "decision, a resolved contradiction, a corrected fact), store it with memory_store (type `decision` "
            "or `fact`, with a stable `key` when it may change again). Never store secrets."
        )

    @server.prompt(
        name="memory-setup",
        title="Set up memory rules for this project",
        description="The rule block to keep in CLAUDE.md, AGENTS.md or .cursor/rules, and how to install it.",
    )
    def memory_setup(target: str = "") -> str:
        named = next((name for key, name in setup.TARGETS.items() if key == target), None)
        files = ", ".join(f"`{name}`" for name in setup.TARGETS.values())
        where = f"`{named}`" if named else f"the project's rule file ({files})"
        return (
            f"Keep the block below in {where}, verbatim. If the file already has a block between "
            f"`{setup.BEGIN}` and `{setup.END}`, replace that block; never add a second one. If the file "
            f"contains `{setup.OPT_OUT}`, leave it alone and say so. (`memvault mcp setup` does this from a "
            "terminal.)\n\n" + setup.block()
        )
