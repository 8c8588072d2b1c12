from memvault_sdk.resources.account import Account, AsyncAccount
from memvault_sdk.resources.admin import AsyncAudit, AsyncKeys, AsyncNamespaces, Audit, Keys, Namespaces
from memvault_sdk.resources.contradictions import AsyncContradictions, Contradictions
from memvault_sdk.resources.entities import AsyncEntities, AsyncRelations, Entities, Relations
from memvault_sdk.resources.events import AsyncEvents, AsyncSessions, Events, Sessions
from memvault_sdk.resources.jobs import AsyncJobs, Jobs
from memvault_sdk.resources.members import AsyncMembers, Members
from memvault_sdk.resources.memories import AsyncMemories, Memories
from memvault_sdk.resources.portability import AsyncPortability, Portability
from memvault_sdk.resources.recall import AsyncRecall, Recall
from memvault_sdk.resources.traces import AsyncTraces, Traces
from memvault_sdk.resources.webhook_endpoints import AsyncWebhooks, Webhooks

__all__ = [
    "Account",
    "AsyncAccount",
    "AsyncAudit",
    "AsyncContradictions",
    "AsyncEntities",
    "AsyncEvents",
    "AsyncJobs",
    "AsyncKeys",
    "AsyncMembers",
    "AsyncMemories",
    "AsyncNamespaces",
    "AsyncPortability",
    "AsyncRecall",
    "AsyncRelations",
    "AsyncSessions",
    "AsyncTraces",
    "AsyncWebhooks",
    "Audit",
    "Contradictions",
    "Entities",
    "Events",
    "Jobs",
    "Keys",
    "Members",
    "Memories",
    "Namespaces",
    "Portability",
    "Recall",
    "Relations",
    "Sessions",
    "Traces",
    "Webhooks",
]
