"""MCP prompts: conversation starters a client offers its user."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer


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
